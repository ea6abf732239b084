#include "conveyor/conveyor.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace netsparse::dist {

namespace {
constexpr std::size_t kHeaderBytes = sizeof(Conveyor::BufferHeader);
static_assert(kHeaderBytes == 16, "the buffer header is 16 bytes on the wire");
}  // namespace

Conveyor::Conveyor(MPI_Comm comm, const ConveyorOptions& options) : options_(options) {
  init();  // validates the options before the collective dup
  porter_ = std::make_unique<MpiPorter>(comm);
  rank_ = porter_->rank();
  size_ = porter_->size();
  headroom_ = porter_->headroom();
}

Conveyor::Conveyor(std::unique_ptr<Porter> porter, const ConveyorOptions& options)
    : porter_(std::move(porter)), options_(options) {
  if (!porter_) throw std::invalid_argument("Conveyor: no porter");
  init();
  rank_ = porter_->rank();
  size_ = porter_->size();
  headroom_ = porter_->headroom();
}

void Conveyor::init() {
  if (options_.buffer_bytes < 1) throw std::invalid_argument("Conveyor: buffer_bytes must be >= 1");
  if (options_.buffers_per_link < 1) {
    throw std::invalid_argument("Conveyor: buffers_per_link must be >= 1");
  }
  if (options_.receive_buffers < 0) {
    throw std::invalid_argument("Conveyor: receive_buffers must be >= 0");
  }
}

Conveyor::~Conveyor() = default;  // the porter releases what may still be in flight

void Conveyor::require_session(const char* call) const {
  if (state_ != State::working && state_ != State::endgame) {
    throw std::logic_error(std::string("Conveyor::") + call + ": no session running (begin first)");
  }
}

void Conveyor::check_item_bytes(std::size_t item_bytes) const {
  if (item_bytes < 1 || item_bytes > options_.buffer_bytes) {
    throw std::invalid_argument(
        "Conveyor::begin: item_bytes " + std::to_string(item_bytes) +
        " must be in [1, buffer_bytes = " + std::to_string(options_.buffer_bytes) + "]");
  }
  const std::size_t buffer =
      headroom_ + kHeaderBytes + options_.buffer_bytes / item_bytes * item_bytes;
  if (buffer > porter_->max_buffer_bytes()) {
    throw std::invalid_argument("Conveyor::begin: a buffer of " + std::to_string(buffer) +
                                " bytes exceeds the porter's largest (" +
                                std::to_string(porter_->max_buffer_bytes()) +
                                "); lower buffer_bytes");
  }
}

void Conveyor::begin(std::size_t item_bytes) {
  if (running()) throw std::logic_error("Conveyor::begin: the previous session is not complete");
  check_item_bytes(item_bytes);
  item_bytes_ = item_bytes;
  capacity_ = options_.buffer_bytes / item_bytes * item_bytes;
  const int bpl = options_.buffers_per_link;

  send_.resize(static_cast<std::size_t>(size_) * bpl);
  links_.assign(static_cast<std::size_t>(size_), Link{});
  for (int d = 0; d < size_; ++d) {
    Link& link = links_[d];
    link.first = d * bpl;
    if (d == rank_) continue;  // no buffers to oneself: the self queue
    for (int j = 0; j < bpl; ++j) {
      SendBuffer& buf = send_[link.first + j];
      buf.bytes.resize(headroom_ + kHeaderBytes + capacity_);
      buf.items = buf.bytes.data() + headroom_ + kHeaderBytes;
      buf.used = 0;
      buf.dest = d;
      buf.in_flight = false;
    }
    link.filling = link.first;
  }
  sends_in_flight_ = 0;
  full_dest_ = -1;

  const int n_recv = size_ == 1                     ? 0
                     : options_.receive_buffers > 0 ? options_.receive_buffers
                                                    : bpl * (size_ - 1);
  ready_.assign(static_cast<std::size_t>(n_recv), Ready{});
  ready_head_ = 0;
  ready_count_ = 0;
  cur_slot_ = -1;
  cur_left_ = 0;
  cur_ = nullptr;
  peers_.assign(static_cast<std::size_t>(size_), Peer{});
  sent_scratch_.resize(send_.size());
  arrived_scratch_.resize(static_cast<std::size_t>(n_recv));
  porter_->begin(static_cast<int>(send_.size()), n_recv, kHeaderBytes + capacity_);

  self_limit_ = capacity_ * static_cast<std::size_t>(bpl);
  self_queue_.clear();
  self_queue_.reserve(self_limit_);  // never reallocates during the session: pulled items stay put
  self_head_ = 0;
  last_pull_ = LastPull::none;
  done_ = false;
  state_ = State::working;
}

std::byte* Conveyor::reserve_slow(int dest) {
  if (state_ != State::working) {
    require_session("push");
    throw std::logic_error("Conveyor::push: called after advance(true)");
  }
  if (dest < 0 || dest >= size_) {
    throw std::out_of_range("Conveyor::push: destination " + std::to_string(dest) +
                            " is not a rank of the " + std::to_string(size_));
  }
  // dest == rank_: the self queue (its capacity is reserved, so earlier items never move).
  if (self_queue_.size() + item_bytes_ > self_limit_) {
    ++stats_.refused;
    return nullptr;
  }
  const std::size_t at = self_queue_.size();
  self_queue_.resize(at + item_bytes_);
  ++stats_.pushed;
  return self_queue_.data() + at;
}

void Conveyor::send_full() {
  const int dest = full_dest_;
  full_dest_ = -1;
  send_buffer(dest, links_[dest].filling, false);
}

void Conveyor::send_buffer(int dest, int b, bool end) {
  Link& link = links_[dest];
  SendBuffer& buf = send_[b];
  BufferHeader header{};
  header.items = static_cast<std::uint32_t>(buf.used / item_bytes_);
  header.flags = end ? kEndFlag : 0;
  header.buffers_total = end ? link.sent + 1 : 0;
  std::memcpy(buf.items - kHeaderBytes, &header, kHeaderBytes);
  const std::size_t bytes = kHeaderBytes + buf.used;
  porter_->send(b, dest, std::span<std::byte>(buf.bytes.data(), headroom_ + bytes));
  buf.in_flight = true;
  ++sends_in_flight_;
  ++link.sent;
  ++stats_.buffers_sent;
  stats_.bytes_sent += bytes;
  link.filling = -1;
  const int bpl = options_.buffers_per_link;
  for (int j = 1; j <= bpl; ++j) {  // the next free buffer after b, round robin
    const int other = link.first + (b - link.first + j) % bpl;
    if (!send_[other].in_flight) {
      link.filling = other;
      break;
    }
  }
}

void Conveyor::progress() {
  int n_sent = 0, n_arrived = 0;
  porter_->poll(sent_scratch_.data(), &n_sent, arrived_scratch_.data(), &n_arrived);
  for (int i = 0; i < n_sent; ++i) {
    SendBuffer& buf = send_[sent_scratch_[i]];
    buf.in_flight = false;
    buf.used = 0;
    --sends_in_flight_;
    Link& link = links_[buf.dest];
    if (link.filling < 0) link.filling = sent_scratch_[i];
  }
  for (int i = 0; i < n_arrived; ++i) {
    const Porter::Arrival& a = arrived_scratch_[i];
    const std::size_t bytes = a.bytes.size();
    if (bytes < kHeaderBytes) {
      throw std::runtime_error("Conveyor: received a " + std::to_string(bytes) +
                               "-byte buffer, shorter than a buffer header");
    }
    BufferHeader header{};
    std::memcpy(&header, a.bytes.data(), kHeaderBytes);
    if (kHeaderBytes + std::size_t{header.items} * item_bytes_ != bytes) {
      throw std::runtime_error("Conveyor: a buffer from rank " + std::to_string(a.src) +
                               " announces " + std::to_string(header.items) +
                               " items but carries " + std::to_string(bytes) + " bytes");
    }
    Peer& peer = peers_[a.src];
    ++peer.received;
    if (header.flags & kEndFlag) peer.expected = header.buffers_total;
    ++stats_.buffers_received;
    if (header.items == 0) {  // an empty END: nothing to pull, the slot is free again
      porter_->release(a.slot);
      continue;
    }
    ready_[(ready_head_ + ready_count_) % ready_.size()] =
        Ready{a.slot, a.src, header.items, a.bytes.data() + kHeaderBytes};
    ++ready_count_;
  }
}

const std::byte* Conveyor::pull_slow(int* from) {
  if (state_ == State::dormant || state_ == State::complete) return nullptr;
  if (cur_slot_ >= 0) {  // drained: the slot takes the next buffer
    porter_->release(cur_slot_);
    cur_slot_ = -1;
  }
  if (ready_count_ != 0) {
    const Ready& r = ready_[ready_head_];
    ready_head_ = ready_head_ + 1 == ready_.size() ? 0 : ready_head_ + 1;
    --ready_count_;
    cur_slot_ = r.slot;
    cur_src_ = r.src;
    cur_ = r.data;
    cur_left_ = r.items;  // >= 1 (empty buffers are never queued)
    return pull(from);
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

void Conveyor::unpull() {
  switch (last_pull_) {
    case LastPull::network:
      cur_ -= item_bytes_;
      ++cur_left_;
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
  if (full_dest_ >= 0) send_full();
  progress();
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
  if (!done_ || sends_in_flight_ != 0) return false;
  for (int d = 0; d < size_; ++d) {
    if (d != rank_ && !links_[d].end_sent) return false;
  }
  for (int s = 0; s < size_; ++s) {
    if (s != rank_ && peers_[s].received != peers_[s].expected) return false;
  }
  if (ready_count_ != 0 || cur_left_ != 0) return false;
  if (self_head_ < self_queue_.size()) return false;
  // Complete: no peer sends this session anything more.
  if (cur_slot_ >= 0) {
    porter_->release(cur_slot_);
    cur_slot_ = -1;
  }
  porter_->end();
  state_ = State::complete;
  return true;
}

}  // namespace netsparse::dist
