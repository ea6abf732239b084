// The C API's one exception -> status map (rig/api_status.hpp over support/api_error.hpp), used
// by the RIG API, ns_open_mpi and the collectives' API alike.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "rig/api_status.hpp"
#include "rig/engine.hpp"

namespace nrig = netsparse::rig;

namespace {

template <class E>
ns_status_t status_after(const E& e) {
  return nrig::guarded("ns_test_call", [&]() -> ns_status_t { throw e; });
}

}  // namespace

TEST(ApiError, EveryExceptionKindHasItsStatus) {
  EXPECT_EQ(status_after(nrig::EngineError(NS_ERR_NOT_REGISTERED, "no region")),
            NS_ERR_NOT_REGISTERED);
  EXPECT_EQ(status_after(std::bad_alloc()), NS_ERR_NO_MEMORY);
  EXPECT_EQ(std::string(ns_last_error()), "ns_test_call: out of memory");
  EXPECT_EQ(status_after(std::invalid_argument("k is 0")), NS_ERR_INVALID);
  // A size this machine or build cannot hold is not a transport failure.
  EXPECT_EQ(status_after(std::length_error("filter too large")), NS_ERR_UNSUPPORTED);
  EXPECT_EQ(std::string(ns_last_error()), "ns_test_call: filter too large");
  EXPECT_EQ(status_after(std::logic_error("wrong order")), NS_ERR_STATE);
  EXPECT_EQ(status_after(std::runtime_error("peer gone")), NS_ERR_TRANSPORT);
  EXPECT_EQ(status_after(42), NS_ERR_TRANSPORT);
  EXPECT_EQ(std::string(ns_last_error()), "ns_test_call: unknown exception");
  EXPECT_EQ(nrig::guarded("ns_test_call", [] { return NS_OK; }), NS_OK);
}
