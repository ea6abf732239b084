// Ranks as threads over an in-process fabric, for the collectives' tests: run a function on P
// communicators, collect each rank's outcome, and the checks the tests share.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/fault_injection.hpp"
#include "transport/transport.hpp"

namespace colltest {

using netsparse::collectives::CollectiveError;
using netsparse::collectives::Communicator;
using netsparse::collectives::Failure;
using netsparse::collectives::FaultInjectingTransport;
using netsparse::collectives::FaultOptions;
using netsparse::collectives::Options;
namespace tr = netsparse::transport;

struct RankOutcome {
  bool threw = false;
  Failure failure = Failure::kProtocol;
  std::string what;
};

// Runs fn on P threads, each with a Communicator over its endpoint (optionally with random
// receive delays). Returns each rank's outcome.
inline std::vector<RankOutcome> run_ranks(
    int P, const std::function<void(int, Communicator&)>& fn, std::uint32_t max_delay_us = 0,
    std::uint64_t seed = 1, int timeout_ms = 20000, std::size_t packet_bytes = 512,
    const std::function<void(tr::InprocFabric&)>& after_open = {}) {
  tr::InprocFabric fabric(P);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < P; ++r) {
    std::unique_ptr<tr::Transport> t = fabric.endpoint(r);
    if (max_delay_us > 0)
      t = std::make_unique<FaultInjectingTransport>(
          std::move(t), FaultOptions{max_delay_us, seed * 131 + static_cast<std::uint64_t>(r), -1});
    Options o;
    o.timeout_ms = timeout_ms;
    o.packet_bytes = packet_bytes;
    comms.push_back(std::make_unique<Communicator>(std::move(t), o));
  }
  if (after_open) after_open(fabric);
  std::vector<RankOutcome> out(static_cast<std::size_t>(P));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r, *comms[static_cast<std::size_t>(r)]);
      } catch (const CollectiveError& e) {
        out[static_cast<std::size_t>(r)] = {true, e.failure(), e.what()};
      } catch (const std::exception& e) {
        out[static_cast<std::size_t>(r)] = {true, Failure::kProtocol, e.what()};
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// In a rank's function: call() must fail with a CollectiveError of `failure` whose message holds
// `text`; anything else fails the rank (an exception naming the check, `what`, or the error).
template <class Call>
void expect_failure(Call&& call, Failure failure, const char* text, const char* what) {
  try {
    call();
  } catch (const CollectiveError& e) {
    if (e.failure() == failure && std::string(e.what()).find(text) != std::string::npos) return;
    throw;
  }
  throw std::runtime_error(std::string(what) + " not detected");
}

inline void expect_all_ok(const std::vector<RankOutcome>& o) {
  for (std::size_t r = 0; r < o.size(); ++r)
    EXPECT_FALSE(o[r].threw) << "rank " << r << ": " << o[r].what;
}

}  // namespace colltest
