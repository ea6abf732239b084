#include "distributed/conveyor.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "distributed/mpi_util.hpp"

namespace netsparse::dist {

namespace {
constexpr std::size_t kHeaderBytes = sizeof(Conveyor::BufferHeader);
static_assert(kHeaderBytes == 16, "the buffer header is 16 bytes on the wire");
}  // namespace

Conveyor::Conveyor(MPI_Comm comm, const ConveyorOptions& options) : options_(options) {
  if (options_.buffer_bytes < 1) throw std::invalid_argument("Conveyor: buffer_bytes must be >= 1");
  if (options_.buffers_per_link < 1) {
    throw std::invalid_argument("Conveyor: buffers_per_link must be >= 1");
  }
  if (options_.receive_buffers < 0) {
    throw std::invalid_argument("Conveyor: receive_buffers must be >= 0");
  }
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  rank_ = comm_rank(comm_);
  size_ = comm_size(comm_);
}

Conveyor::~Conveyor() {
  // Normally every session completed (nothing in flight). After an exception the receives are
  // cancelled and unfinished sends released to MPI.
  for (MPI_Request& r : recv_req_) {
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }
  for (MPI_Request& r : send_req_) {
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Conveyor::require_session(const char* call) const {
  if (state_ != State::working && state_ != State::endgame) {
    throw std::logic_error(std::string("Conveyor::") + call + ": no session running (begin first)");
  }
}

void Conveyor::begin(std::size_t item_bytes) {
  if (running()) throw std::logic_error("Conveyor::begin: the previous session is not complete");
  if (item_bytes < 1 || item_bytes > options_.buffer_bytes) {
    throw std::invalid_argument(
        "Conveyor::begin: item_bytes " + std::to_string(item_bytes) +
        " must be in [1, buffer_bytes = " + std::to_string(options_.buffer_bytes) + "]");
  }
  item_bytes_ = item_bytes;
  capacity_ = options_.buffer_bytes / item_bytes * item_bytes;
  ++session_;
  const int bpl = options_.buffers_per_link;

  send_.resize(static_cast<std::size_t>(size_) * bpl);
  send_req_.assign(send_.size(), MPI_REQUEST_NULL);
  send_owner_.assign(send_.size(), -1);
  links_.assign(static_cast<std::size_t>(size_), Link{});
  for (int d = 0; d < size_; ++d) {
    if (d == rank_) continue;
    Link& link = links_[d];
    for (int j = 0; j < bpl; ++j) {
      const int b = d * bpl + j;
      send_[b].bytes.resize(kHeaderBytes + capacity_);
      send_[b].used = 0;
      send_[b].in_flight = false;
      send_owner_[b] = d;
      link.buffers.push_back(b);
    }
    link.filling = link.buffers.front();
  }

  const int n_recv = size_ == 1                     ? 0
                     : options_.receive_buffers > 0 ? options_.receive_buffers
                                                    : bpl * (size_ - 1);
  recv_.resize(static_cast<std::size_t>(n_recv));
  recv_req_.assign(recv_.size(), MPI_REQUEST_NULL);
  ready_.assign(recv_.size(), -1);
  ready_src_.assign(recv_.size(), -1);
  ready_items_.assign(recv_.size(), 0);
  ready_head_ = 0;
  ready_count_ = 0;
  cur_slot_ = -1;
  cur_pos_ = 0;
  test_indices_.resize(std::max(send_.size(), recv_.size()));
  peers_.assign(static_cast<std::size_t>(size_), Peer{});
  for (int s = 0; s < n_recv; ++s) {
    recv_[s].resize(kHeaderBytes + capacity_);
    post_receive(s);
  }

  self_limit_ = capacity_ * static_cast<std::size_t>(bpl);
  self_queue_.clear();
  self_queue_.reserve(self_limit_);  // never reallocates during the session: pulled items stay put
  self_head_ = 0;
  last_pull_ = LastPull::none;
  done_ = false;
  state_ = State::working;
}

void Conveyor::post_receive(int slot) {
  // A peer can be at most one session ahead (a session cannot complete without this rank), so
  // the session's parity as tag keeps the next session's buffers out of this session's receives.
  const int tag = static_cast<int>(session_ & 1);
  check_mpi(MPI_Irecv(recv_[slot].data(), static_cast<int>(recv_[slot].size()), MPI_BYTE,
                      MPI_ANY_SOURCE, tag, comm_, &recv_req_[slot]),
            "MPI_Irecv");
}

bool Conveyor::push(const void* item, int dest) {
  if (state_ != State::working) {
    require_session("push");
    throw std::logic_error("Conveyor::push: called after advance(true)");
  }
  if (dest < 0 || dest >= size_) {
    throw std::out_of_range("Conveyor::push: destination " + std::to_string(dest) +
                            " is not a rank of the " + std::to_string(size_));
  }
  if (dest == rank_) {
    if (self_queue_.size() + item_bytes_ > self_limit_) {
      ++stats_.refused;
      return false;
    }
    const auto* p = static_cast<const std::byte*>(item);
    self_queue_.insert(self_queue_.end(), p, p + item_bytes_);
    ++stats_.pushed;
    return true;
  }
  Link& link = links_[dest];
  if (link.filling < 0) {
    ++stats_.refused;
    return false;
  }
  SendBuffer& buf = send_[link.filling];
  std::memcpy(buf.bytes.data() + kHeaderBytes + buf.used, item, item_bytes_);
  buf.used += item_bytes_;
  ++stats_.pushed;
  if (buf.used + item_bytes_ > capacity_) send_buffer(dest, link.filling, false);
  return true;
}

void Conveyor::send_buffer(int dest, int b, bool end) {
  Link& link = links_[dest];
  SendBuffer& buf = send_[b];
  BufferHeader header{};
  header.items = static_cast<std::uint32_t>(buf.used / item_bytes_);
  header.flags = end ? kEndFlag : 0;
  header.buffers_total = end ? link.sent + 1 : 0;
  std::memcpy(buf.bytes.data(), &header, kHeaderBytes);
  const int bytes = static_cast<int>(kHeaderBytes + buf.used);
  check_mpi(MPI_Isend(buf.bytes.data(), bytes, MPI_BYTE, dest, static_cast<int>(session_ & 1),
                      comm_, &send_req_[b]),
            "MPI_Isend");
  buf.in_flight = true;
  ++link.sent;
  ++stats_.buffers_sent;
  stats_.bytes_sent += static_cast<std::uint64_t>(bytes);
  link.filling = -1;
  for (int other : link.buffers) {
    if (!send_[other].in_flight) {
      link.filling = other;
      break;
    }
  }
}

void Conveyor::progress_sends() {
  if (send_req_.empty()) return;
  int n = 0;
  check_mpi(MPI_Testsome(static_cast<int>(send_req_.size()), send_req_.data(), &n,
                         test_indices_.data(), MPI_STATUSES_IGNORE),
            "MPI_Testsome");
  if (n == MPI_UNDEFINED) return;  // nothing active
  for (int i = 0; i < n; ++i) {
    const int b = test_indices_[i];
    send_[b].in_flight = false;
    send_[b].used = 0;
    Link& link = links_[send_owner_[b]];
    if (link.filling < 0) link.filling = b;
  }
}

void Conveyor::progress_receives() {
  if (recv_req_.empty()) return;
  int n = 0;
  statuses_.resize(recv_req_.size());
  check_mpi(MPI_Testsome(static_cast<int>(recv_req_.size()), recv_req_.data(), &n,
                         test_indices_.data(), statuses_.data()),
            "MPI_Testsome");
  if (n == MPI_UNDEFINED) return;
  for (int i = 0; i < n; ++i) {
    const int slot = test_indices_[i];
    const MPI_Status& st = statuses_[i];
    int bytes = 0;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    BufferHeader header{};
    if (bytes < static_cast<int>(kHeaderBytes)) {
      throw std::runtime_error("Conveyor: received a " + std::to_string(bytes) +
                               "-byte message, shorter than a buffer header");
    }
    std::memcpy(&header, recv_[slot].data(), kHeaderBytes);
    if (kHeaderBytes + std::size_t{header.items} * item_bytes_ != static_cast<std::size_t>(bytes)) {
      throw std::runtime_error("Conveyor: a buffer from rank " + std::to_string(st.MPI_SOURCE) +
                               " announces " + std::to_string(header.items) +
                               " items but carries " + std::to_string(bytes) + " bytes");
    }
    Peer& peer = peers_[st.MPI_SOURCE];
    ++peer.received;
    if (header.flags & kEndFlag) peer.expected = header.buffers_total;
    ++stats_.buffers_received;
    if (header.items == 0) {  // an empty END: nothing to pull, the slot is free again
      post_receive(slot);
      continue;
    }
    ready_src_[slot] = st.MPI_SOURCE;
    ready_items_[slot] = header.items;
    ready_[(ready_head_ + ready_count_) % ready_.size()] = slot;
    ++ready_count_;
  }
}

const std::byte* Conveyor::pull(int* from) {
  if (state_ == State::dormant || state_ == State::complete) return nullptr;
  for (;;) {
    if (cur_slot_ >= 0) {
      if (cur_pos_ < ready_items_[cur_slot_]) {
        const std::byte* item =
            recv_[cur_slot_].data() + kHeaderBytes + std::size_t{cur_pos_} * item_bytes_;
        ++cur_pos_;
        *from = ready_src_[cur_slot_];
        last_pull_ = LastPull::network;
        ++stats_.pulled;
        return item;
      }
      post_receive(cur_slot_);  // drained: the slot takes the next buffer
      cur_slot_ = -1;
    }
    if (ready_count_ == 0) break;
    cur_slot_ = ready_[ready_head_];
    ready_head_ = (ready_head_ + 1) % ready_.size();
    --ready_count_;
    cur_pos_ = 0;
  }
  if (self_head_ < self_queue_.size()) {
    const std::byte* item = self_queue_.data() + self_head_;
    self_head_ += item_bytes_;
    *from = rank_;
    last_pull_ = LastPull::self;
    ++stats_.pulled;
    return item;
  }
  // Drained: the self queue restarts at its beginning (the caller released its last item by
  // calling pull again).
  self_queue_.clear();
  self_head_ = 0;
  last_pull_ = LastPull::none;
  return nullptr;
}

bool Conveyor::pull(void* item, int* from) {
  const std::byte* p = pull(from);
  if (p == nullptr) return false;
  std::memcpy(item, p, item_bytes_);
  return true;
}

void Conveyor::unpull() {
  switch (last_pull_) {
    case LastPull::network:
      --cur_pos_;
      break;
    case LastPull::self:
      self_head_ -= item_bytes_;
      break;
    case LastPull::none:
      throw std::logic_error("Conveyor::unpull: only directly after a successful pull");
  }
  --stats_.pulled;
  last_pull_ = LastPull::none;
}

bool Conveyor::advance(bool done) {
  if (state_ == State::dormant || state_ == State::complete) return false;
  if (done && !done_) {
    done_ = true;
    state_ = State::endgame;
  } else if (!done && done_) {
    throw std::logic_error("Conveyor::advance: done went back to false");
  }
  progress_sends();
  progress_receives();
  if (done_) {
    // The last buffer to each peer carries END (possibly with items, possibly empty). A link whose
    // buffers are all in flight sends it on a later advance.
    for (int d = 0; d < size_; ++d) {
      Link& link = links_[d];
      if (d == rank_ || link.end_sent || link.filling < 0) continue;
      send_buffer(d, link.filling, true);
      link.end_sent = true;
    }
  }
  return !try_finish();
}

bool Conveyor::try_finish() {
  if (!done_) return false;
  for (int d = 0; d < size_; ++d) {
    if (d != rank_ && !links_[d].end_sent) return false;
  }
  for (const MPI_Request& r : send_req_) {
    if (r != MPI_REQUEST_NULL) return false;
  }
  for (int s = 0; s < size_; ++s) {
    if (s != rank_ && peers_[s].received != peers_[s].expected) return false;
  }
  if (ready_count_ != 0) return false;
  if (cur_slot_ >= 0 && cur_pos_ < ready_items_[cur_slot_]) return false;
  if (self_head_ < self_queue_.size()) return false;
  // Complete: no peer sends this session anything more, so the posted receives can only be
  // cancelled (the next session uses the other tag).
  for (MPI_Request& r : recv_req_) {
    if (r == MPI_REQUEST_NULL) continue;
    check_mpi(MPI_Cancel(&r), "MPI_Cancel");
    MPI_Status st;
    check_mpi(MPI_Wait(&r, &st), "MPI_Wait");
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    if (!cancelled) throw std::logic_error("Conveyor: a buffer arrived after END (protocol bug)");
  }
  cur_slot_ = -1;
  state_ = State::complete;
  return true;
}

}  // namespace netsparse::dist
