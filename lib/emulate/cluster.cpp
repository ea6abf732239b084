#include "emulate/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "concat/frame.hpp"
#include "concat/protocol.hpp"
#include "emulate/workload.hpp"
#include "netsparse/netsparse.h"
#include "rig/clock.hpp"
#include "rig/engine.hpp"
#include "rig/handles.hpp"
#include "transport/transport.hpp"

namespace netsparse::emulate {

void fill_property(std::uint64_t row, std::span<std::byte> out) noexcept {
  std::uint64_t x = row * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (std::size_t i = 0; i < out.size(); ++i) {
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    out[i] = static_cast<std::byte>(x & 0xFF);
  }
}

namespace {

// The collectives engines use while a region is registered (allgather of the arguments, a
// barrier): each node registers from its own thread during setup, so these block like the real
// ones. Never used on the virtual-time path.
class SetupCollectives {
 public:
  explicit SetupCollectives(int nodes) : nodes_(nodes) {}
  void allgather(int rank, const void* mine, std::size_t bytes, void* all) {
    std::unique_lock<std::mutex> lk(mu_);
    if (buffer_.size() != bytes * static_cast<std::size_t>(nodes_))
      buffer_.assign(bytes * static_cast<std::size_t>(nodes_), std::byte{0});
    std::memcpy(buffer_.data() + bytes * static_cast<std::size_t>(rank), mine, bytes);
    arrive(lk);
    std::memcpy(all, buffer_.data(), bytes * static_cast<std::size_t>(nodes_));
    arrive(lk);  // nobody refills the buffer before everyone has read it
  }
  void barrier() {
    std::unique_lock<std::mutex> lk(mu_);
    arrive(lk);
  }

 private:
  void arrive(std::unique_lock<std::mutex>& lk) {
    const std::uint64_t gen = generation_;
    if (++arrived_ == nodes_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return generation_ != gen; });
    }
  }
  int nodes_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<std::byte> buffer_;
};

// What a node's transport holds between engine steps: frames received (delivered by the fabric
// at their arrival time) and frames the last step sent (injected into the fabric when the step
// ends in virtual time). Sent frames are appended to one flat buffer per node (no allocation per
// frame): `outgoing` fills during a step (and during the engine step a host's ns_post_send runs
// before it); at its end it becomes `in_transit` until the injection event (a node's next step
// never starts before that event has run, so one buffer suffices).
struct OutFrame {
  int dest;
  std::size_t offset, bytes;  // in the buffer
  // Where the engine's outbox sends it: engine steps in order (a host's ns_post_send runs one
  // too), in a step's flush the destinations in the order they got their first packet in the
  // step, each one's frames in order (EmulatedTransport::touch): (step << 32) | position.
  std::uint64_t order;
};
struct FrameBuffer {
  std::vector<std::byte> bytes;
  std::vector<OutFrame> frames;
  bool empty() const noexcept { return frames.empty(); }
  void clear() noexcept {
    bytes.clear();
    frames.clear();
  }
};
struct NodeWire {
  std::deque<std::pair<int, std::vector<std::byte>>> inbox;
  FrameBuffer outgoing, in_transit;
  std::uint64_t bytes_sent = 0;
  // Buffers of received packets the engine has read, shared by every node: the fabric's pooled
  // packets get them back (no allocation per packet delivered).
  std::vector<std::vector<std::byte>>* spare = nullptr;
  // Frame buffers the transport lends to the engine's outbox, shared by every node (one node
  // steps at a time): a buffer is back here as soon as its frame is committed.
  std::vector<std::unique_ptr<std::byte[]>>* lend_pool = nullptr;
};

// The frames of a step in the order the engine's outbox would have sent them from its queues
// at the end of the step (the order the fabric then takes them in): lent frames are committed
// earlier when full, out of that order.
void order_frames(FrameBuffer& out) {
  const auto by_order = [](const OutFrame& a, const OutFrame& b) { return a.order < b.order; };
  if (!std::is_sorted(out.frames.begin(), out.frames.end(), by_order))
    std::stable_sort(out.frames.begin(), out.frames.end(), by_order);
}

// The engine's transport on the emulated fabric. It reports itself as `inproc` (the kind the
// engine knows); one-sided reads are not offered.
class EmulatedTransport final : public transport::Transport {
 public:
  EmulatedTransport(int rank, int size, NodeWire& wire, SetupCollectives& setup,
                    std::size_t frame_bytes)
      : rank_(rank),
        size_(size),
        frame_bytes_(frame_bytes),
        wire_(wire),
        setup_(setup),
        touched_(static_cast<std::size_t>(size), 0),
        touch_order_(static_cast<std::size_t>(size), 0),
        lent_(static_cast<std::size_t>(size)) {}
  transport::TransportKind kind() const noexcept override {
    return transport::TransportKind::kInproc;
  }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_packet_bytes() const noexcept override { return frame_bytes_; }
  transport::TxStatus send(int dest, std::span<const std::byte> frame) override {
    if (dest < 0 || dest >= size_ || frame.empty() || frame.size() > frame_bytes_)
      return transport::TxStatus::kError;
    append(dest, frame);
    return transport::TxStatus::kOk;
  }
  // The engine's outbox builds its frames here, in buffers of the shared pool, instead of in
  // frame buffers of its own that it keeps per destination (~500 per node at 1024 nodes).
  std::span<std::byte> reserve(int dest) override {
    if (dest < 0 || dest >= size_) return {};
    auto& lent = lent_[static_cast<std::size_t>(dest)];
    if (lent == nullptr) {
      auto& pool = *wire_.lend_pool;
      if (pool.empty()) {
        lent = std::make_unique_for_overwrite<std::byte[]>(frame_bytes_);
      } else {
        lent = std::move(pool.back());
        pool.pop_back();
      }
    }
    touch(dest);
    return {lent.get(), frame_bytes_};
  }
  bool lends(int) const noexcept override { return true; }
  transport::TxStatus commit(int dest, std::size_t bytes) override {
    if (dest < 0 || dest >= size_ || lent_[static_cast<std::size_t>(dest)] == nullptr ||
        bytes > frame_bytes_)
      return transport::TxStatus::kError;
    auto& lent = lent_[static_cast<std::size_t>(dest)];
    if (bytes > 0) append(dest, {lent.get(), bytes});
    wire_.lend_pool->push_back(std::move(lent));
    return transport::TxStatus::kOk;
  }
  int poll(const std::function<void(const transport::ReceivedPacket&)>& handler,
           int max_packets) override {
    // Called once at the start of every engine step, before anything is sent: the outbox's
    // flush at the end of the previous step has sent every frame.
    ++step_;
    next_order_ = 0;
    int n = 0;
    while (n < max_packets && !wire_.inbox.empty()) {
      auto& [src, bytes] = wire_.inbox.front();
      handler(transport::ReceivedPacket{src, bytes});
      if (wire_.spare != nullptr) wire_.spare->push_back(std::move(bytes));
      wire_.inbox.pop_front();
      ++n;
    }
    return n;
  }
  int register_memory(void*, std::size_t) override { return 0; }
  void deregister_memory(int) override {}
  transport::TxStatus read(int, int, std::uint64_t, void*, std::size_t, std::uint64_t) override {
    return transport::TxStatus::kError;
  }
  int poll_reads(transport::ReadCompletion*, int) override { return 0; }
  void barrier() override { setup_.barrier(); }
  void allgather(const void* mine, std::size_t bytes, void* all) override {
    setup_.allgather(rank_, mine, bytes, all);
  }
  bool peer_failed(int) const noexcept override { return false; }
  std::uint64_t bytes_sent() const noexcept override { return wire_.bytes_sent; }
  std::string detail() const override { return "emulated fabric (virtual time)"; }

  // The largest frame (transport message) the engine may send. Frames only group the packets
  // of one engine step per destination; the fabric carries each packet on its own (inject), so
  // the frame size changes nothing the emulator computes as long as every packet fits. A step
  // holds a whole frame for each destination it sends to (lent from the pool, or in the outbox's
  // own buffers, which it keeps: about 500 per node at 1024 nodes): frames are as small as the
  // largest packet allows (docs/emulation.md, "At 1024 nodes").
  static constexpr std::size_t kMaxFrameBytes = 65536;
  static std::size_t frame_bytes_for(std::uint32_t packet_bytes, std::uint32_t prop_bytes) {
    // One response PR alone (a property above packet_bytes travels as one oversized packet):
    // the largest packet the engine's concatenation point emits, with packet_bytes.
    const std::size_t largest = std::max<std::size_t>(
        packet_bytes, concat::packet_bytes(concat::PrType::kResponse, prop_bytes, 1));
    return std::min(largest, kMaxFrameBytes);
  }

 private:
  // The first packet of this step to dest (the outbox then lists dest to be flushed, in this
  // order); the position of dest in that order.
  std::uint64_t touch(int dest) {
    const auto d = static_cast<std::size_t>(dest);
    if (touched_[d] != step_) {
      touched_[d] = step_;
      touch_order_[d] = next_order_++;
    }
    return std::uint64_t{step_} << 32 | touch_order_[d];
  }
  void append(int dest, std::span<const std::byte> frame) {
    FrameBuffer& out = wire_.outgoing;
    out.frames.push_back(OutFrame{dest, out.bytes.size(), frame.size(), touch(dest)});
    out.bytes.insert(out.bytes.end(), frame.begin(), frame.end());
    wire_.bytes_sent += frame.size();
  }

  int rank_, size_;
  std::size_t frame_bytes_;
  NodeWire& wire_;
  SetupCollectives& setup_;
  std::uint32_t step_ = 1, next_order_ = 0;
  std::vector<std::uint32_t> touched_, touch_order_;  // per destination
  std::vector<std::unique_ptr<std::byte[]>> lent_;    // per destination: its lent frame
};

struct Node {
  int rank = 0;
  ns_context* ctx = nullptr;
  ns_cq* cq = nullptr;
  ns_qp* qp = nullptr;
  ns_mr* mr = nullptr;
  NodeWire wire;
  std::vector<std::byte> props;  // this node's rows
  std::byte* out = nullptr;      // INDEXED output over every global row
  std::vector<std::byte> own_out;
  const std::vector<std::uint64_t>* idxs = nullptr;
  std::size_t next_pos = 0;  // first idx not yet posted
  std::uint64_t wrs_total = 0, wrs_posted = 0, wrs_done = 0, wrs_failed = 0;
  Picos busy_until = 0;
  Picos next_step = kNever;  // the step scheduled, kNever if none
  // Which scheduled step event is the live one: a superseded event can fall due at the very
  // time of a later-scheduled step, so the time alone does not tell them apart (it ran a step
  // before the frames of the one before it were injected: gen:road:4096 on 128 nodes).
  std::uint64_t step_token = 0;
  bool host_due = false;  // a host turn (posting) is scheduled
  Picos done_ps = 0;
  Picos last_send_ps = 0;  // the end of the last engine step that sent packets
  std::uint64_t steps = 0;
  // Accounting of where virtual time goes (NodeResult's fields of the same names).
  Picos busy_ps = 0, last_account = 0;
  std::uint64_t client_cycles = 0, server_cycles = 0, outstanding = 0, max_outstanding = 0;
  double outstanding_ps = 0;
};

std::uint64_t virtual_now_ns(const void* events) {
  return static_cast<const EventQueue*>(events)->now() / kPicosPerNano;
}

class Run {
 public:
  Run(const ClusterConfig& config, const Workload& w)
      : config_(config), w_(w), fabric_(events_, config.fabric), setup_(config.fabric.nodes) {}

  // Runs the workload on the emulated cluster to its end and returns what every part counted.
  RunResult simulate();

 private:
  void open_nodes();
  [[nodiscard]] RunResult collect_results() const;
  void close_nodes();
  void post_more(Node& n);
  void host_turn(Node& n, Picos when);
  void verify_completed(const Node& n, std::uint64_t wr_id);
  void schedule_step(Node& n, Picos when);
  void step(Node& n);
  // rack_waves: a node of the current wave completed (or had nothing to gather); the next wave
  // starts when the wave has none left.
  void wave_node_done(Picos now);
  void start_wave(Picos when);
  void inject(Node& n);  // puts the frames of n's last step (n.wire.in_transit) on the fabric
  Picos cycles_ps(std::uint64_t cycles) const {
    return static_cast<Picos>(
        std::llround(static_cast<double>(cycles) * 1000.0 / config_.node.clock_ghz));
  }

  const ClusterConfig& config_;
  const Workload& w_;
  EventQueue events_;
  Fabric fabric_;
  SetupCollectives setup_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<TorSwitch>> tors_;
  std::vector<std::byte> shared_out_;
  std::uint64_t wrong_at_completion_ = 0;
  Picos grid_ps_ = 0;  // NodeModel::step_grid_cycles in picoseconds
  int wave_ = -1;      // rack_waves: the wave gathering now (-1 before the first)
  int wave_left_ = 0;  // its nodes that have not completed yet
  std::vector<std::span<const std::byte>> frame_packets_;  // inject's split of a frame
  std::vector<std::vector<std::byte>> spare_bytes_;        // NodeWire::spare
  std::vector<std::unique_ptr<std::byte[]>> lend_pool_;    // NodeWire::lend_pool
};

void Run::open_nodes() {
  const int N = config_.fabric.nodes;
  const NodeModel& m = config_.node;
  const ns_context_attr attr = node_attr(m);
  const rig::Config cfg = rig::Config::from_attr(&attr);
  const std::uint64_t total_rows = w_.row_offsets.back();
  if (!w_.verify) shared_out_.resize(total_rows * w_.prop_bytes);
  const std::size_t frame_bytes = EmulatedTransport::frame_bytes_for(m.packet_bytes, w_.prop_bytes);
  for (int r = 0; r < N; ++r) {
    auto n = std::make_unique<Node>();
    n->rank = r;
    n->wire.spare = &spare_bytes_;
    n->wire.lend_pool = &lend_pool_;
    auto tx = std::make_unique<EmulatedTransport>(r, N, n->wire, setup_, frame_bytes);
    n->ctx = new ns_context(std::move(tx), cfg);
    rig::register_handle(n->ctx, rig::HandleKind::kContext);
    const std::uint64_t begin = w_.row_offsets[static_cast<std::size_t>(r)];
    const std::uint64_t rows = w_.row_offsets[static_cast<std::size_t>(r) + 1] - begin;
    n->props.resize(rows * w_.prop_bytes);
    for (std::uint64_t i = 0; i < rows; ++i)
      fill_property(begin + i, {n->props.data() + i * w_.prop_bytes, w_.prop_bytes});
    if (w_.verify) {
      n->own_out.resize(total_rows * w_.prop_bytes);
      n->out = n->own_out.data();
    } else {
      n->out = shared_out_.data();
    }
    n->idxs = &w_.idxs[static_cast<std::size_t>(r)];
    n->wrs_total = (n->idxs->size() + m.batch - 1) / m.batch;
    nodes_.push_back(std::move(n));
  }
  // Registration is collective (arguments agreed by allgather, then a barrier): one thread per
  // node, as real ranks would do it.
  std::vector<std::string> errors(static_cast<std::size_t>(N));
  std::vector<std::thread> threads;
  for (int r = 0; r < N; ++r) {
    threads.emplace_back([this, r, &errors] {
      Node& n = *nodes_[static_cast<std::size_t>(r)];
      const std::uint64_t rows = n.props.size() / w_.prop_bytes;
      if (ns_reg_props(n.ctx, n.props.data(), rows, w_.prop_bytes, w_.row_offsets.data(), &n.mr) !=
          NS_OK)
        errors[static_cast<std::size_t>(r)] = ns_last_error();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < N; ++r)
    if (!errors[static_cast<std::size_t>(r)].empty())
      throw std::runtime_error("node " + std::to_string(r) + ": " +
                               errors[static_cast<std::size_t>(r)]);
  for (auto& n : nodes_) {
    if (ns_create_cq(n->ctx, static_cast<int>(m.qp_depth) * 2, &n->cq) != NS_OK ||
        ns_create_qp(n->ctx, n->cq, static_cast<int>(m.qp_depth), &n->qp) != NS_OK)
      throw std::runtime_error(std::string("queue creation: ") + ns_last_error());
  }
}

void Run::close_nodes() {
  for (auto& n : nodes_) {
    if (n->qp != nullptr) ns_destroy_qp(n->qp);
    if (n->cq != nullptr) ns_destroy_cq(n->cq);
    if (n->ctx != nullptr) {
      rig::unregister_handle(n->ctx);
      delete n->ctx;  // no collective teardown: every request has completed
      n->ctx = nullptr;
    }
  }
}

void Run::post_more(Node& n) {
  const NodeModel& m = config_.node;
  while (n.wrs_posted - n.wrs_done < m.qp_depth && n.next_pos < n.idxs->size()) {
    ns_send_wr wr = gather_wr(n.wrs_posted, *n.idxs, m.batch, n.mr, n.out, w_.row_offsets.back(),
                              w_.prop_bytes);
    ns_send_wr* bad = nullptr;
    const ns_status_t s = ns_post_send(n.qp, &wr, &bad);
    if (s == NS_ERR_NO_RESOURCE) return;
    if (s != NS_OK)
      throw std::runtime_error("node " + std::to_string(n.rank) +
                               ": ns_post_send: " + ns_last_error());
    ++n.wrs_posted;
    n.next_pos += wr.wr.rig.count;
  }
}

// A work request that completed successfully has every property it asked for in place now
// (not merely by the end of the run): one that coalesced onto another's request must not
// complete before that request's answer arrived.
void Run::verify_completed(const Node& n, std::uint64_t wr_id) {
  const std::size_t begin = static_cast<std::size_t>(wr_id) * config_.node.batch;
  const std::size_t end = std::min(begin + config_.node.batch, n.idxs->size());
  const std::uint64_t own_begin = w_.row_offsets[static_cast<std::size_t>(n.rank)];
  const std::uint64_t own_end = w_.row_offsets[static_cast<std::size_t>(n.rank) + 1];
  std::vector<std::byte> expected(w_.prop_bytes);
  for (std::size_t k = begin; k < end; ++k) {
    const std::uint64_t idx = (*n.idxs)[k];
    if (idx >= own_begin && idx < own_end) continue;  // local: skipped by REMOTE_ONLY
    fill_property(idx, expected);
    if (std::memcmp(n.out + idx * w_.prop_bytes, expected.data(), w_.prop_bytes) != 0)
      ++wrong_at_completion_;
  }
}

// The host sees completions and posts more work requests; they reach the NIC at `when`.
void Run::host_turn(Node& n, Picos when) {
  if (n.host_due || n.next_pos >= n.idxs->size()) return;
  n.host_due = true;
  Node* np = &n;
  events_.at(when, [this, np] {
    np->host_due = false;
    const std::uint64_t before = np->wrs_posted;
    post_more(*np);
    if (np->wrs_posted != before) schedule_step(*np, events_.now());
  });
}

void Run::schedule_step(Node& n, Picos when) {
  when = std::max({when, n.busy_until, events_.now()});
  if (grid_ps_ > 1) when = (when + grid_ps_ - 1) / grid_ps_ * grid_ps_;
  if (n.next_step <= when) return;  // an earlier step is already due
  n.next_step = when;
  Node* np = &n;
  const std::uint64_t token = ++n.step_token;
  events_.at(when, [this, np, token] {
    if (np->step_token != token) return;  // superseded by an earlier one
    np->next_step = kNever;
    step(*np);
  });
}

void Run::step(Node& n) {
  rig::Engine& e = *n.ctx;
  const Picos now = events_.now();
  ++n.steps;
  int work = e.progress_inline();
  ns_wc wc[64];
  bool completed = false;
  for (int got; (got = static_cast<rig::Cq*>(n.cq)->poll(64, wc)) > 0;) {
    for (int i = 0; i < got; ++i) {
      ++n.wrs_done;
      if (wc[i].status != NS_WC_SUCCESS) {
        ++n.wrs_failed;
      } else if (w_.verify) {
        verify_completed(n, wc[i].wr_id);
      }
    }
    completed = true;
  }
  if (completed) host_turn(n, now + 2 * config_.node.pcie_ns * kPicosPerNano);
  if (n.wrs_done == n.wrs_total && n.done_ps == 0 && n.wrs_total != 0) {
    n.done_ps = now;
    if (config_.rack_waves) wave_node_done(now);
  }
  // The step's hardware time: the busiest client unit walks one idx per cycle (a unit walks
  // only its own command, so idxs walked by one unit do not spread over the others); the
  // server units share incoming reads (the paper's Q Control), one PR per cycle each.
  const rig::Engine::UnitWork uw = e.take_unit_work();
  const std::uint64_t su = static_cast<std::uint64_t>(config_.node.server_units);
  const std::uint64_t client_cycles = uw.max_unit_walked, server_cycles = (uw.served + su - 1) / su;
  const std::uint64_t cycles = std::max<std::uint64_t>({1, client_cycles, server_cycles});
  const Picos end = now + cycles_ps(cycles);
  n.busy_until = end;
  n.busy_ps += end - now;
  n.client_cycles += client_cycles;
  n.server_cycles += server_cycles;
  n.outstanding_ps +=
      static_cast<double>(n.outstanding) * static_cast<double>(now - n.last_account);
  n.last_account = now;
  n.outstanding = uw.sent_total - uw.responses_total;
  n.max_outstanding = std::max(n.max_outstanding, n.outstanding);
  if (!n.wire.outgoing.empty()) {
    order_frames(n.wire.outgoing);
    // The previous step's frames were injected before this step ran (their event was scheduled
    // before any later step of this node, at a time no later than it).
    if (!n.wire.in_transit.empty()) throw std::logic_error("emulator: frames not yet injected");
    std::swap(n.wire.outgoing, n.wire.in_transit);
    n.last_send_ps = end;
    Node* np = &n;
    events_.at(end, [this, np] { inject(*np); });
  }
  if (work > 0 || completed || !n.wire.inbox.empty()) {
    schedule_step(n, end);
  } else {
    const std::uint64_t timer_ns = e.next_timer_ns();
    if (timer_ns != UINT64_MAX) schedule_step(n, timer_ns * kPicosPerNano);
  }
}

void Run::start_wave(Picos when) {
  const int per_rack = fabric_.nodes_per_rack();
  while (++wave_ < per_rack) {
    wave_left_ = 0;
    for (auto& n : nodes_) {
      if (n->rank % per_rack != wave_ || n->wrs_total == 0) continue;
      ++wave_left_;
      host_turn(*n, when);
    }
    if (wave_left_ > 0) return;  // else a wave with nothing to gather: the next one
  }
}

void Run::wave_node_done(Picos now) {
  if (--wave_left_ == 0) start_wave(now + config_.node.pcie_ns * kPicosPerNano);
}

void Run::inject(Node& n) {
  std::vector<std::span<const std::byte>>& packets = frame_packets_;
  packets.resize(concat::kMaxPacketsPerFrame);  // once: the split writes into it
  FrameBuffer& sent = n.wire.in_transit;
  for (const OutFrame& f : sent.frames) {
    const concat::FrameSplit split =
        concat::split_frame({sent.bytes.data() + f.offset, f.bytes}, packets);
    if (split.error != concat::DecodeError::kOk)
      throw std::logic_error("the engine sent a malformed frame");
    for (std::size_t k = 0; k < split.packets; ++k) fabric_.send(n.rank, f.dest, packets[k]);
  }
  sent.clear();  // keeps its capacity for the node's next steps
}

RunResult Run::simulate() {
  const int N = config_.fabric.nodes;
  if (w_.row_offsets.size() != static_cast<std::size_t>(N) + 1 ||
      w_.idxs.size() != static_cast<std::size_t>(N) || w_.prop_bytes == 0)
    throw std::invalid_argument(
        "Workload: row_offsets needs nodes + 1 entries, idxs one list "
        "per node, prop_bytes > 0");
  if (config_.node.batch == 0 || config_.node.qp_depth == 0)
    throw std::invalid_argument("NodeModel: batch and qp_depth must be > 0");
  grid_ps_ = cycles_ps(config_.node.step_grid_cycles);
  open_nodes();
  struct Closer {
    Run* run;
    ~Closer() { run->close_nodes(); }
  } closer{this};
  for (int t = 0; t < fabric_.racks(); ++t)
    tors_.push_back(
        std::make_unique<TorSwitch>(t, fabric_, config_.tor, w_.prop_bytes, w_.row_offsets));
  if (config_.tor.enabled) {
    fabric_.set_tor_hook([this](int tor, Packet& p, bool from_node) {
      return tors_[static_cast<std::size_t>(tor)]->on_fabric_packet(p, from_node);
    });
  }
  fabric_.set_receiver([this](int node, Packet& p) {
    Node& n = *nodes_[static_cast<std::size_t>(node)];
    // The engine checks its frames' source; a packet a switch assembled has none, so it is
    // attributed to the first node of that switch's rack.
    const int src = p.src >= 0 ? p.src : p.src_tor * fabric_.nodes_per_rack();
    n.wire.inbox.emplace_back(src, std::move(p.bytes));
    if (!spare_bytes_.empty()) {  // the pooled packet keeps a buffer for its next use
      p.bytes = std::move(spare_bytes_.back());
      spare_bytes_.pop_back();
    }
    schedule_step(n, events_.now());
  });

  rig::ScopedClockOverride clock(&virtual_now_ns, &events_);
  if (config_.rack_waves) {
    start_wave(config_.node.pcie_ns * kPicosPerNano);
  } else {
    for (auto& n : nodes_) {
      if (n->wrs_total == 0) continue;
      host_turn(*n, config_.node.pcie_ns * kPicosPerNano);
    }
  }
  events_.run();
  return collect_results();
}

RunResult Run::collect_results() const {
  RunResult r;
  r.events = events_.events_run();
  r.wrong_at_completion = wrong_at_completion_;
  r.links = fabric_.total();
  r.inter_rack = fabric_.inter_rack();
  r.router_links = fabric_.router_links();
  r.busiest_router_link = fabric_.busiest_router_link();
  r.router_link_count = fabric_.router_link_count();
  r.router_diameter = fabric_.router_diameter();
  r.delivered_by_links.assign(fabric_.delivered_by_links(),
                              fabric_.delivered_by_links() + Fabric::kMaxHops + 1);
  r.delivered_by_router_links.assign(fabric_.delivered_by_router_links(),
                                     fabric_.delivered_by_router_links() + Fabric::kMaxHops + 1);
  for (auto& n : nodes_) {
    const rig::Engine::Snapshot s = n->ctx->snapshot();
    NodeResult nr;
    nr.requested = s.client.requested;
    nr.filtered = s.client.filtered;
    nr.coalesced = s.client.coalesced;
    nr.local = s.client.local;
    nr.sent = s.client.sent;
    nr.responses = s.client.responses;
    nr.served = s.server.answered;
    nr.nic = s.concat;
    nr.tx_wire_bytes = fabric_.uplink(n->rank).wire_bytes;
    nr.rx_wire_bytes = fabric_.downlink(n->rank).wire_bytes;
    nr.tx_packets = fabric_.uplink(n->rank).packets;
    nr.rx_packets = fabric_.downlink(n->rank).packets;
    nr.tx_busy_ps = fabric_.uplink(n->rank).busy_ps;
    nr.rx_busy_ps = fabric_.downlink(n->rank).busy_ps;
    nr.tx_wait_ps = fabric_.uplink(n->rank).total_wait_ps;
    nr.rx_wait_ps = fabric_.downlink(n->rank).total_wait_ps;
    nr.done_ps = n->done_ps;
    nr.last_send_ps = n->last_send_ps;
    nr.steps = n->steps;
    nr.busy_ps = n->busy_ps;
    nr.client_cycles = n->client_cycles;
    nr.server_cycles = n->server_cycles;
    nr.outstanding_ps = n->outstanding_ps;
    nr.max_outstanding = n->max_outstanding;
    nr.pending_stalls = s.client.stalls;
    nr.wrs = n->wrs_total;
    nr.failed_wrs = n->wrs_failed + (n->wrs_total - n->wrs_done);
    r.makespan_ps = std::max(r.makespan_ps, n->done_ps);
    r.nodes.push_back(nr);
  }
  for (auto& t : tors_) {
    r.tors.push_back(t->stats());
    r.caches.push_back(t->cache().stats());
    r.tor_concat.push_back(t->concat_stats());
  }
  if (w_.verify) {
    std::vector<std::byte> expected(w_.prop_bytes);
    for (auto& n : nodes_) {
      const std::uint64_t begin = w_.row_offsets[static_cast<std::size_t>(n->rank)];
      const std::uint64_t end = w_.row_offsets[static_cast<std::size_t>(n->rank) + 1];
      for (std::uint64_t idx : *n->idxs) {
        if (idx >= begin && idx < end) continue;  // local: skipped by REMOTE_ONLY
        fill_property(idx, expected);
        ++r.checked_properties;
        if (std::memcmp(n->out + idx * w_.prop_bytes, expected.data(), w_.prop_bytes) != 0)
          ++r.wrong_properties;
      }
    }
  }
  return r;
}

}  // namespace

Cluster::Cluster(const ClusterConfig& config) : config_(config) {
  EventQueue probe;
  Fabric check(probe, config.fabric);  // validates the shape now
}

RunResult Cluster::run(const Workload& workload) {
  Run run(config_, workload);
  return run.simulate();
}

}  // namespace netsparse::emulate
