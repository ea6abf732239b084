#include "emulate/event_queue.hpp"

#include <algorithm>
#include <string>

namespace netsparse::emulate {

void EventQueue::at(Picos time, Action action) {
  if (time < now_)
    throw std::invalid_argument("EventQueue::at: time " + std::to_string(time) +
                                " ps is before now " + std::to_string(now_) + " ps");
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    actions_[slot] = std::move(action);
  } else {
    slot = static_cast<std::uint32_t>(actions_.size());
    actions_.push_back(std::move(action));
  }
  heap_.push_back(Entry{time, next_seq_++, slot});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

bool EventQueue::run_one() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  const Entry e = heap_.back();
  heap_.pop_back();
  now_ = e.time;
  // Move the action out first: it may schedule events, which may reuse or grow actions_.
  Action action = std::move(actions_[e.slot]);
  actions_[e.slot] = nullptr;
  free_slots_.push_back(e.slot);
  ++events_run_;
  action();
  return true;
}

void EventQueue::run_until(Picos until) {
  while (!heap_.empty() && heap_.front().time <= until) run_one();
  now_ = std::max(now_, until);
}

std::uint64_t EventQueue::run(std::uint64_t max_events) {
  std::uint64_t n = 0;
  while (n < max_events && run_one()) ++n;
  return n;
}

}  // namespace netsparse::emulate
