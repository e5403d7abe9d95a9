#pragma once
// An agent's readings of one entity, by vocabulary entry (common/counters.h).
//
// A poll of an 8-port host fills about 500 values. Held in std::maps keyed
// by name, each cost a tree node and often a key string, allocated and freed
// again every poll, and each was found again by name when the batch was
// built. Here a value sits in a slot numbered by its entry's place in the
// vocabulary: one block per entity, found by index, iterated in vocabulary
// order.
//
// The interface is the std::map subset the agents use: operator[], at(),
// count(), size(), and iteration over (name, value) pairs.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "common/counters.h"

namespace rocefab {

// A counter's values by priority or queue, in ascending order. Eight fit
// without an allocation.
class IndexedValues {
 public:
  using Entry = std::pair<uint32_t, uint64_t>;

  uint64_t& operator[](uint32_t index) {
    auto it = LowerBound(index);
    if (it == values_.end() || it->first != index) it = values_.insert(it, Entry{index, 0});
    return it->second;
  }
  uint64_t at(uint32_t index) const {
    auto it = LowerBound(index);
    if (it == values_.end() || it->first != index) throw std::out_of_range("IndexedValues::at");
    return it->second;
  }
  size_t count(uint32_t index) const {
    auto it = LowerBound(index);
    return it != values_.end() && it->first == index ? 1 : 0;
  }
  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  auto begin() const { return values_.begin(); }
  auto end() const { return values_.end(); }

 private:
  using Values = absl::InlinedVector<Entry, 8>;
  template <class It>
  static It LowerBound(It begin, It end, uint32_t index) {
    return std::lower_bound(begin, end, index, [](const Entry& e, uint32_t i) { return e.first < i; });
  }
  Values::iterator LowerBound(uint32_t index) { return LowerBound(values_.begin(), values_.end(), index); }
  Values::const_iterator LowerBound(uint32_t index) const { return LowerBound(values_.begin(), values_.end(), index); }
  Values values_;
};

// Values of type V by vocabulary entry of one scope.
template <class V>
class ByCounter {
 public:
  explicit ByCounter(v1::Scope scope) : scope_(scope) {}

  V& operator[](const CounterDef& def) {
    std::optional<V>& slot = Slot(def);
    if (!slot) {
      slot.emplace();
      ++size_;
    }
    return *slot;
  }
  // By vocabulary name. A name outside the scope's vocabulary is a
  // programming error: the agents' names come from the vocabulary itself.
  V& operator[](std::string_view name) { return (*this)[Def(name)]; }

  const V& at(std::string_view name) const {
    const CounterDef* def = FindCounter(scope_, name);
    const std::optional<V>* slot = def != nullptr ? Find(*def) : nullptr;
    if (slot == nullptr || !*slot) throw std::out_of_range("ByCounter::at: " + std::string(name));
    return **slot;
  }
  size_t count(std::string_view name) const {
    const CounterDef* def = FindCounter(scope_, name);
    const std::optional<V>* slot = def != nullptr ? Find(*def) : nullptr;
    return slot != nullptr && *slot ? 1 : 0;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // fn(const CounterDef&, const V&) for each value, in vocabulary order.
  template <class Fn>
  void ForEach(Fn&& fn) const {
    const CounterDef* all = AllCounters().data();
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i]) fn(all[base_ + i], *slots_[i]);
  }
  // Drops the values whose name `drop(name)` is true.
  template <class Pred>
  void EraseIf(Pred&& drop) {
    const CounterDef* all = AllCounters().data();
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] && drop(all[base_ + i].name)) {
        slots_[i].reset();
        --size_;
      }
  }

  // Iteration over (name, value) pairs, as over a std::map.
  class const_iterator {
   public:
    std::pair<std::string_view, const V&> operator*() const {
      return {owner_->NameAt(i_), *owner_->slots_[i_]};
    }
    const_iterator& operator++() {
      ++i_;
      Skip();
      return *this;
    }
    bool operator==(const const_iterator& other) const { return i_ == other.i_; }
    bool operator!=(const const_iterator& other) const { return i_ != other.i_; }

   private:
    friend class ByCounter;
    const_iterator(const ByCounter* owner, size_t i) : owner_(owner), i_(i) { Skip(); }
    void Skip() {
      while (i_ < owner_->slots_.size() && !owner_->slots_[i_]) ++i_;
    }
    const ByCounter* owner_;
    size_t i_;
  };
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, slots_.size()); }

 private:
  const CounterDef& Def(std::string_view name) const {
    const CounterDef* def = FindCounter(scope_, name);
    if (def == nullptr) throw std::invalid_argument("not a counter of this scope: " + std::string(name));
    return *def;
  }
  std::optional<V>& Slot(const CounterDef& def) {
    if (slots_.empty()) {
      const auto scope = CountersOfScope(scope_);
      base_ = static_cast<size_t>(scope.data() - AllCounters().data());
      slots_.resize(scope.size());
    }
    const size_t i = static_cast<size_t>(&def - AllCounters().data()) - base_;
    if (def.scope != scope_ || i >= slots_.size())
      throw std::invalid_argument("not a counter of this scope: " + std::string(def.name));
    return slots_[i];
  }
  const std::optional<V>* Find(const CounterDef& def) const {
    if (slots_.empty()) return nullptr;
    const size_t i = static_cast<size_t>(&def - AllCounters().data()) - base_;
    return i < slots_.size() ? &slots_[i] : nullptr;
  }
  std::string_view NameAt(size_t i) const { return AllCounters()[base_ + i].name; }

  v1::Scope scope_;
  size_t base_ = 0;
  size_t size_ = 0;
  std::vector<std::optional<V>> slots_;  // sized to the scope's vocabulary on first use
};

}  // namespace rocefab
