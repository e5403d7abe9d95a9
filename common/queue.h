#pragma once
// A typed, closable queue between two modules' threads, in the Open/R
// manner: the producer pushes, the consumer pops in bulk, and closing the
// queue is how the consumer learns to stop. It may be bounded by a total
// weight (say, samples): a producer then waits while the queue is full, which
// is how a slow consumer pushes back instead of growing memory without bound.
//
// Thread-safe. Any number of producers; one consumer.

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace rocefab {

template <typename T>
class Queue final {
 public:
  explicit Queue(size_t capacity = SIZE_MAX) : capacity_(capacity) {}
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Waits while the queue holds `capacity` or more; an item heavier than the
  // capacity still goes into an empty queue. Returns the microseconds it
  // waited, or -1 when the queue is closed (the item is dropped).
  int64_t Push(T item, size_t weight = 1) {
    std::unique_lock lock(mu_);
    int64_t waited_us = 0;
    if (weight_ >= capacity_ && !closed_) {
      const auto start = std::chrono::steady_clock::now();
      space_.wait(lock, [&] { return closed_ || weight_ < capacity_; });
      waited_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    }
    if (closed_) return -1;
    items_.push_back({std::move(item), weight});
    weight_ += weight;
    cv_.notify_one();
    return waited_us;
  }

  // Waits up to `timeout` for at least one item, then takes up to `max`.
  // Returns false once the queue is closed and drained.
  bool PopAll(std::vector<T>* out, std::chrono::microseconds timeout, size_t max = SIZE_MAX) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [this] { return closed_ || !items_.empty(); });
    const bool was_full = weight_ >= capacity_;
    while (!items_.empty() && out->size() < max) {
      out->push_back(std::move(items_.front().item));
      weight_ -= items_.front().weight;
      items_.pop_front();
    }
    if (was_full && weight_ < capacity_) space_.notify_all();
    return !(closed_ && items_.empty() && out->empty());
  }

  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    cv_.notify_all();
    space_.notify_all();
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }
  size_t weight() const {
    std::lock_guard lock(mu_);
    return weight_;
  }

 private:
  struct Entry {
    T item;
    size_t weight;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_, space_;
  std::deque<Entry> items_;
  size_t weight_ = 0;
  bool closed_ = false;
};

}  // namespace rocefab
