// Request/reply over two conveyors, the loop written once (after bale's biconveyor): requests
// travel on one Conveyor, replies on another (one per direction, so a rank that cannot push a
// reply still accepts requests: no deadlock), and the owner's side is an `answer` callback.
//
//   RequestReply rr(comm, request_options, reply_options);   // collective
//   rr.begin(request_bytes, reply_bytes);                     // collective
//   auto answer = [&](const std::byte* request, int from, std::byte* reply) { ... };
//   while (rr.advance(i == n, answer)) {                      // done: no more requests here
//     for (; i < n; ++i) if (!rr.push(&request[i], dest[i])) break;   // refused: backpressure
//     while (const std::byte* reply = rr.pull(&from)) consume(reply, from);
//   }                                                         // false: all answered, all pulled
//
// advance() makes progress on both conveyors and answers every request that has arrived: for
// each, answer(request, from, reply) writes reply_bytes straight into the reply conveyor's
// buffer towards `from` (no copy); when that buffer is full and in flight the request is put
// back (unpull) and answered on a later advance. The request conveyor completing (no request
// can arrive any more: all were pulled and answered) is the reply conveyor's `done`. Replies
// come back in no particular order, so a request carries whatever the requester needs to place
// its reply (a position, an offset). Requests to oneself are answered like any other.
//
// `answer` is a template parameter, inlined into the serve loop: no per-item virtual call,
// std::function or allocation.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <stdexcept>

#include "conveyor/conveyor.hpp"

namespace netsparse::dist {

class RequestReply {
 public:
  // Over MPI (two MpiPorters, each on its own duplicate of comm). Collective.
  explicit RequestReply(MPI_Comm comm, const ConveyorOptions& requests = {},
                        const ConveyorOptions& replies = {})
      : requests_(comm, requests), replies_(comm, replies) {}
  // Over any porters, one per direction (e.g. two TransportPorters on different endpoints).
  RequestReply(std::unique_ptr<Porter> request_porter, std::unique_ptr<Porter> reply_porter,
               const ConveyorOptions& requests = {}, const ConveyorOptions& replies = {})
      : requests_(std::move(request_porter), requests),
        replies_(std::move(reply_porter), replies) {}

  // Starts a session (collective in effect, as Conveyor::begin). Each item size must fit its
  // conveyor's buffer_bytes (std::invalid_argument otherwise).
  void begin(std::size_t request_bytes, std::size_t reply_bytes) {
    if (running()) {
      throw std::logic_error("RequestReply::begin: the previous session is not complete");
    }
    requests_.check_item_bytes(request_bytes);  // both checked before either begins
    replies_.check_item_bytes(reply_bytes);
    requests_.begin(request_bytes);
    replies_.begin(reply_bytes);
    more_requests_ = true;
    more_replies_ = true;
  }

  // Sends a request to dest (this rank included); false if refused (backpressure: advance and
  // retry). Same contract as Conveyor::push.
  [[nodiscard]] bool push(const void* request, int dest) { return requests_.push(request, dest); }
  // Without a copy: room for one request, written before the next call (Conveyor::reserve).
  [[nodiscard]] std::byte* reserve(int dest) { return requests_.reserve(dest); }

  // Progress on both directions and answers the requests that arrived. `done`: this rank
  // pushes no more requests (must stay true once given). Returns false once the session is
  // complete on this rank: every request it pushed was answered and every reply pulled, every
  // request to it answered.
  template <class Answer>
  bool advance(bool done, Answer&& answer) {
    more_requests_ = requests_.advance(done);
    int from = 0;
    while (const std::byte* request = requests_.pull(&from)) {
      std::byte* reply = replies_.reserve(from);
      if (reply == nullptr) {  // `from`'s reply buffers are all in flight: answer it later
        requests_.unpull();
        break;
      }
      answer(request, from, reply);
    }
    more_replies_ = replies_.advance(!more_requests_);
    return more_requests_ || more_replies_;
  }

  // The next reply (valid until the next pull or advance), or nullptr; *from = the rank that
  // answered it.
  [[nodiscard]] const std::byte* pull(int* from) { return replies_.pull(from); }
  [[nodiscard]] bool pull(void* reply, int* from) { return replies_.pull(reply, from); }

  [[nodiscard]] bool running() const noexcept { return requests_.running() || replies_.running(); }
  [[nodiscard]] int rank() const noexcept { return requests_.rank(); }
  [[nodiscard]] int size() const noexcept { return requests_.size(); }
  [[nodiscard]] const Conveyor& requests() const noexcept { return requests_; }
  [[nodiscard]] const Conveyor& replies() const noexcept { return replies_; }
  void reset_stats() noexcept {
    requests_.reset_stats();
    replies_.reset_stats();
  }

 private:
  Conveyor requests_;
  Conveyor replies_;
  bool more_requests_ = false;
  bool more_replies_ = false;
};

}  // namespace netsparse::dist
