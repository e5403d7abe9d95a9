#pragma once
// A typed, unbounded, closable queue between two modules' threads, in the
// Open/R manner: the producer pushes, the consumer pops in bulk, and closing
// the queue is how the consumer learns to stop.
//
// Thread-safe. Any number of producers; one consumer.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace rocefab {

template <typename T>
class Queue final {
 public:
  Queue() = default;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // False when the queue is closed (the item is dropped).
  bool Push(T item) {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    items_.push_back(std::move(item));
    cv_.notify_one();
    return true;
  }

  // Waits up to `timeout` for at least one item, then takes up to `max`.
  // Returns false once the queue is closed and drained.
  bool PopAll(std::vector<T>* out, std::chrono::microseconds timeout, size_t max = SIZE_MAX) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [this] { return closed_ || !items_.empty(); });
    while (!items_.empty() && out->size() < max) {
      out->push_back(std::move(items_.front()));
      items_.pop_front();
    }
    return !(closed_ && items_.empty() && out->empty());
  }

  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace rocefab
