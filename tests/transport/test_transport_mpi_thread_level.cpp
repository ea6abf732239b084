// MPI initialized with MPI_THREAD_SINGLE (netsparse_test_mpi_main_single, tests/common): a
// transport that needs a concurrent progress thread must be refused with a message that names
// the provided and the required level and the fix; one that does not is fine from the main
// thread.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <thread>

#include "transport/transport_factory.hpp"

namespace netsparse::transport {
namespace {

TEST(MpiThreadLevel, RefusesProgressThreadWithoutThreadMultiple) {
  int provided = -1;
  MPI_Query_thread(&provided);
  ASSERT_EQ(provided, MPI_THREAD_SINGLE) << "precondition: this binary initializes SINGLE";
  try {
    make_mpi_transport(MPI_COMM_WORLD, /*need_thread_multiple=*/true);
    ADD_FAILURE() << "transport created although MPI_THREAD_MULTIPLE is missing";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("provides thread level MPI_THREAD_SINGLE"), std::string::npos) << m;
    EXPECT_NE(m.find("MPI_THREAD_MULTIPLE is required"), std::string::npos) << m;
    EXPECT_NE(m.find("MPI_Init_thread"), std::string::npos) << m;
  }
}

TEST(MpiThreadLevel, SingleThreadedUseIsAccepted) {
  auto t = make_mpi_transport(MPI_COMM_WORLD, /*need_thread_multiple=*/false);
  ASSERT_NE(t, nullptr);
  const std::byte b[4] = {};
  ASSERT_EQ(t->send(t->rank(), b), TxStatus::kOk);
  int got = 0;
  while (got == 0) got = t->poll([](const ReceivedPacket& p) { EXPECT_EQ(p.bytes.size(), 4u); }, 1);
  t->barrier();
}

TEST(MpiThreadLevel, RefusesCreationFromAnotherThreadBelowSerialized) {
  std::string message;
  std::thread other([&] {
    try {
      make_mpi_transport(MPI_COMM_WORLD, /*need_thread_multiple=*/false);
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
  });
  other.join();
  EXPECT_NE(message.find("other than the main thread"), std::string::npos) << message;
  EXPECT_NE(message.find("MPI_THREAD_SINGLE"), std::string::npos) << message;
}

}  // namespace
}  // namespace netsparse::transport
