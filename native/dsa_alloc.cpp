// dsa_alloc.cpp -- the profiling / slab CPU allocator behind dsa.adapters.torch.
//
// One c10::Allocator is installed once, with c10::SetCPUAllocator(&alloc, 255),
// and never swapped back (oneDNN looks the CPU allocator up again when it frees).
// Every allocation it does not serve from a slab goes to the allocator that was
// installed before it (the "default" allocator); every pointer it did not hand
// out from a slab is handed back to that allocator's deleter.
//
// Modes are per thread.  A thread is in passthrough mode unless Python opened a
// session on it:
//   profile  every allocation of the thread is recorded (size, sequence number,
//            thread, the node of the ATen op stack in flight) and paired with
//            its free by address (the pointer -> record map is exact while the
//            block is live);
//   replay   the k-th allocation of the pass is served at slab + offset[k] if
//            its size matches the plan, its predecessors in that slab region
//            have been freed, and the plan marks it as slab-served; frees of
//            slab pointers only update the slab's bookkeeping.  The first
//            mismatch sends the rest of the pass to the default allocator.
// A global atomic count of open sessions keeps passthrough at one relaxed load.
//
// DataPtr data and context are always the same pointer: oneDNN calls
// Allocator::raw_allocate, which asserts it, and raw_deallocate, which hands
// the bare pointer to raw_deleter().  Allocations are therefore identified by
// address, never by a context object.
//
// The C interface at the bottom is loaded with ctypes; it includes no
// torch/extension.h, so a cold build takes seconds, not minutes.

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <map>
#include <new>
#include <set>
#include <tuple>
#include <string>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr int64_t kAlign = 64;  // c10's CPU alignment; kernels rely on it
constexpr int kEscaped = 16;    // flag in dsa_replay_end's result

c10::Allocator* g_prev = nullptr;         // the allocator installed before ours
c10::DeleterFnPtr g_prev_delete = nullptr;
std::atomic<int> g_sessions{0};           // open profile + replay sessions
std::atomic<int> g_profiling{0};          // open profile sessions
// allocations made while a session was open, on threads without one (intra-op
// workers, other Python threads): they go to the default allocator
std::atomic<int64_t> g_other_allocs{0};
std::atomic<int64_t> g_other_bytes{0};

uint64_t this_thread_id() {
  return static_cast<uint64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

// ---------------------------------------------------------------- op stacks
// The stacks of ATen ops in flight form a trie: node 0 is the empty stack and
// every other node is (parent node, op name).  A profiling thread keeps its
// current node; an allocation records that node, so the whole stack costs one
// integer per allocation.
std::mutex g_trie_mu;
std::vector<int32_t> g_node_parent{-1};
std::vector<int32_t> g_node_name{-1};
std::vector<std::string> g_names;
std::unordered_map<std::string, int32_t> g_name_ids;
std::unordered_map<uint64_t, int32_t> g_children;

thread_local int32_t t_node = 0;
struct Profile;
thread_local Profile* t_profile = nullptr;

struct StackContext : at::ObserverContext {
  int32_t parent;
};

int32_t child_node(int32_t parent, const char* name) {
  std::lock_guard<std::mutex> lock(g_trie_mu);
  std::string key(name ? name : "");
  auto it = g_name_ids.find(key);
  int32_t name_id;
  if (it == g_name_ids.end()) {
    name_id = static_cast<int32_t>(g_names.size());
    g_names.push_back(key);
    g_name_ids.emplace(std::move(key), name_id);
  } else {
    name_id = it->second;
  }
  uint64_t edge = (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) |
                  static_cast<uint32_t>(name_id);
  auto child = g_children.find(edge);
  if (child != g_children.end()) return child->second;
  int32_t node = static_cast<int32_t>(g_node_parent.size());
  g_node_parent.push_back(parent);
  g_node_name.push_back(name_id);
  g_children.emplace(edge, node);
  return node;
}

bool profile_wants_stacks(const Profile* prof);

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  // the callback is global: a thread profiling without stacks (or not at all) keeps node 0
  if (t_profile == nullptr || !profile_wants_stacks(t_profile)) return nullptr;
  auto ctx = std::make_unique<StackContext>();
  ctx->parent = t_node;
  t_node = child_node(t_node, fn.name());
  return ctx;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx != nullptr && t_profile != nullptr) {
    t_node = static_cast<StackContext*>(ctx)->parent;
  }
}

std::mutex g_callback_mu;
int g_callback_users = 0;
at::CallbackHandle g_callback = 0;

void callback_acquire() {
  std::lock_guard<std::mutex> lock(g_callback_mu);
  if (g_callback_users++ == 0) {
    g_callback = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end)
            .needsInputs(false)
            .needsOutputs(false)
            .needsIds(false));
  }
}

void callback_release() {
  std::lock_guard<std::mutex> lock(g_callback_mu);
  if (--g_callback_users == 0) {
    at::removeCallback(g_callback);
    g_callback = 0;
  }
}

// ---------------------------------------------------------------- profiling
struct Record {
  void* ptr;
  int64_t size;
  int64_t start;  // session clock at the allocation
  int64_t end;    // session clock at the free, -1 while live
  int32_t node;   // op-stack trie node
  uint64_t thread;
};

struct Arena;

struct Profile {
  std::vector<Record> records;
  int64_t clock = 0;  // one tick per recorded allocation and per matching free
  uint64_t thread = 0;
  Arena* arena = nullptr;  // where the pass's blocks come from (nullptr: the default allocator)
  bool op_stacks = true;   // record each allocation's op stack (the RecordFunction callback)
};

bool profile_wants_stacks(const Profile* prof) { return prof->op_stacks; }

std::mutex g_prof_mu;  // guards g_prof_live and every Profile's records/clock
std::unordered_map<void*, std::pair<Profile*, int64_t>> g_prof_live;

// Records the free of p if a live profile owns it.
void profile_free(void* p) {
  std::lock_guard<std::mutex> lock(g_prof_mu);
  auto it = g_prof_live.find(p);
  if (it == g_prof_live.end()) return;
  Profile* prof = it->second.first;
  prof->records[it->second.second].end = prof->clock++;
  g_prof_live.erase(it);
}

void profiled_delete(void* p) {
  if (g_profiling.load(std::memory_order_acquire) > 0) profile_free(p);
  g_prev_delete(p);
}

// ---------------------------------------------------------------- registries
// Address ranges (slab regions, profile-arena chunks) that a free must
// recognise, in a fixed array read without locks: a record's base and bytes
// never change once it is added, and records are never freed, so a lookup
// that raced with a removal reads constants.  Adding takes a lock.
template <typename T>
struct Registry {
  static constexpr int kSlots = 4096;
  std::atomic<T*> slots[kSlots];
  std::atomic<int> hwm{0};
  std::mutex mu;

  // The record whose [base, base + bytes) holds p, or nullptr.
  T* find(const void* p) const {
    const int n = hwm.load(std::memory_order_acquire);
    const char* c = static_cast<const char*>(p);
    for (int i = 0; i < n; ++i) {
      T* r = slots[i].load(std::memory_order_acquire);
      if (r != nullptr && c >= r->base && c < r->base + r->bytes) return r;
    }
    return nullptr;
  }

  // Sets r->slot (-1 when every slot is taken).
  void add(T* r) {
    std::lock_guard<std::mutex> lock(mu);
    r->slot = -1;
    for (int i = 0; i < kSlots; ++i) {
      if (slots[i].load(std::memory_order_relaxed) == nullptr) {
        r->slot = i;
        slots[i].store(r, std::memory_order_release);
        if (i + 1 > hwm.load(std::memory_order_relaxed)) hwm.store(i + 1, std::memory_order_release);
        return;
      }
    }
  }

  void remove(T* r) {
    if (r->slot >= 0) slots[r->slot].store(nullptr, std::memory_order_release);
    r->slot = -1;
  }

  int size() const {
    const int n = hwm.load(std::memory_order_acquire);
    int live = 0;
    for (int i = 0; i < n; ++i) live += slots[i].load(std::memory_order_acquire) != nullptr;
    return live;
  }
};

// ---------------------------------------------------------------- profile arenas
// A profiled pass takes its blocks from a private arena (best fit, free blocks
// coalesced, 64-byte aligned) rather than from the default allocator, so that
// it touches about the pass's live bytes and nothing of it stays cached in
// malloc afterwards.  When the pass ends the arena is retired: the pages of
// its free blocks go back to the system, and it is unmapped when the last
// block that escaped the pass (an output) dies.  Chunks are reserved as
// address space (MAP_NORESERVE) and faulted in as they are used.
constexpr int64_t kChunkBytes = int64_t{1} << 30;

struct ArenaChunk {
  char* base = nullptr;
  int64_t bytes = 0;
  Arena* arena = nullptr;
  int slot = -1;
};

struct Arena {
  std::mutex mu;
  std::vector<ArenaChunk*> chunks;
  std::map<std::pair<int, int64_t>, int64_t> free_at;  // (chunk, offset) -> size
  std::set<std::tuple<int64_t, int, int64_t>> by_size;  // (size, chunk, offset)
  std::unordered_map<char*, std::pair<int64_t, int64_t>> used;  // block -> (size taken, size asked)
  int64_t bytes_used = 0;                                        // sum of sizes asked
  bool retired = false;
};

Registry<ArenaChunk> g_chunks;  // chunk and arena records are never freed, only emptied

void arena_insert_free(Arena* a, int chunk, int64_t off, int64_t size) {
  a->free_at.emplace(std::make_pair(chunk, off), size);
  a->by_size.emplace(size, chunk, off);
}

void arena_erase_free(Arena* a, int chunk, int64_t off, int64_t size) {
  a->free_at.erase(std::make_pair(chunk, off));
  a->by_size.erase(std::make_tuple(size, chunk, off));
}

// Called with a->mu held: maps a new chunk of at least `need` bytes.
bool arena_grow(Arena* a, int64_t need) {
  const int64_t bytes = std::max(kChunkBytes, (need + kChunkBytes - 1) / kChunkBytes * kChunkBytes);
  void* mem = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return false;
  auto* k = new (std::nothrow) ArenaChunk();
  if (k == nullptr) {
    munmap(mem, static_cast<size_t>(bytes));
    return false;
  }
  k->base = static_cast<char*>(mem);
  k->bytes = bytes;
  k->arena = a;
  g_chunks.add(k);
  if (k->slot < 0) {  // every slot taken
    munmap(mem, static_cast<size_t>(bytes));
    delete k;
    return false;
  }
  const int index = static_cast<int>(a->chunks.size());
  a->chunks.push_back(k);
  arena_insert_free(a, index, 0, bytes);
  return true;
}

// A block of n bytes from the arena, or nullptr (the caller then uses the default allocator).
void* arena_alloc(Arena* a, size_t n) {
  const int64_t need = (std::max<int64_t>(static_cast<int64_t>(n), 1) + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> lock(a->mu);
  auto it = a->by_size.lower_bound(std::make_tuple(need, -1, int64_t{-1}));
  if (it == a->by_size.end()) {
    if (!arena_grow(a, need)) return nullptr;
    it = a->by_size.lower_bound(std::make_tuple(need, -1, int64_t{-1}));
    if (it == a->by_size.end()) return nullptr;
  }
  const auto [size, chunk, off] = *it;
  arena_erase_free(a, chunk, off, size);
  if (size > need) arena_insert_free(a, chunk, off + need, size - need);
  char* p = a->chunks[chunk]->base + off;
  a->used.emplace(p, std::make_pair(need, static_cast<int64_t>(n)));
  a->bytes_used += static_cast<int64_t>(n);
  if (c10::memoryProfilingEnabled()) {  // torch.profiler(profile_memory=True) sees it, as with c10's allocator
    c10::reportMemoryUsageToProfiler(p, static_cast<int64_t>(n), static_cast<size_t>(a->bytes_used), 0,
                                     c10::Device(c10::DeviceType::CPU));
  }
  return p;
}

void release_range(char* base, int64_t lo, int64_t hi);

// Called with a->mu held, once the arena is retired and holds no block.
void arena_unmap(Arena* a) {
  for (ArenaChunk* k : a->chunks) {
    g_chunks.remove(k);
    munmap(k->base, static_cast<size_t>(k->bytes));
  }
  a->chunks.clear();
  a->free_at.clear();
  a->by_size.clear();
}

void arena_free(ArenaChunk* k, void* p) {
  Arena* a = k->arena;
  std::lock_guard<std::mutex> lock(a->mu);
  auto used = a->used.find(static_cast<char*>(p));
  if (used == a->used.end()) return;
  int64_t size = used->second.first;
  const int64_t asked = used->second.second;
  a->used.erase(used);
  a->bytes_used -= asked;
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(p, -asked, static_cast<size_t>(a->bytes_used), 0,
                                     c10::Device(c10::DeviceType::CPU));
  }
  int chunk = -1;
  for (size_t i = 0; i < a->chunks.size(); ++i) {
    if (a->chunks[i] == k) chunk = static_cast<int>(i);
  }
  if (chunk < 0) return;
  int64_t off = static_cast<char*>(p) - k->base;
  // coalesce with the free neighbours
  auto next = a->free_at.find(std::make_pair(chunk, off + size));
  if (next != a->free_at.end()) {
    const int64_t next_size = next->second;
    arena_erase_free(a, chunk, off + size, next_size);
    size += next_size;
  }
  auto prev = a->free_at.lower_bound(std::make_pair(chunk, off));
  if (prev != a->free_at.begin()) {
    --prev;
    if (prev->first.first == chunk && prev->first.second + prev->second == off) {
      const int64_t prev_off = prev->first.second, prev_size = prev->second;
      arena_erase_free(a, chunk, prev_off, prev_size);
      off = prev_off;
      size += prev_size;
    }
  }
  arena_insert_free(a, chunk, off, size);
  if (a->retired) {
    if (a->used.empty()) {
      arena_unmap(a);
    } else {
      release_range(k->base, off, off + size);
    }
  }
}

// Ends the pass of an arena: the pages of its free blocks go back to the
// system, and the arena is unmapped now or when its last block dies.
void arena_retire(Arena* a) {
  std::lock_guard<std::mutex> lock(a->mu);
  a->retired = true;
  if (a->used.empty()) {
    arena_unmap(a);
    return;
  }
  for (const auto& [where, size] : a->free_at) {
    release_range(a->chunks[where.first]->base, where.second, where.second + size);
  }
}

void arena_delete(void* p) {
  if (g_profiling.load(std::memory_order_acquire) > 0) profile_free(p);
  if (ArenaChunk* k = g_chunks.find(p)) arena_free(k, p);
}

// ---------------------------------------------------------------- replay
struct Plan {
  int64_t n = 0;                  // allocations of the profiled pass, in order
  std::vector<int64_t> size;      // requested bytes
  std::vector<int64_t> offset;    // slab offset, -1 = default allocator
  std::vector<int64_t> deadline;  // first allocation index after its free
  std::vector<int64_t> by_deadline;  // slab-served indices sorted by deadline
  std::vector<int64_t> offsets;      // distinct offsets of slab-served blocks, sorted
  std::vector<int64_t> slot;         // index of offset[i] in offsets (-1: not slab-served)
  int64_t slab_bytes = 0;
};

// One slab region.  The metadata is never freed (the registry below is read
// without locks); the bytes are freed once the region is retired and empty,
// after its registry slot is cleared, so later lookups never see the region.
struct SlabMem {
  char* base = nullptr;
  int64_t bytes = 0;
  std::shared_ptr<const Plan> plan;
  std::mutex mu;
  std::vector<uint8_t> state;    // per allocation: 0 unused, 1 live, 2 freed
  std::vector<int64_t> live_at;  // per distinct offset: the live block there, or -1
  int64_t live = 0;
  bool retired = false;
  int slot = -1;
};

Registry<SlabMem> g_slabs;

int64_t page_size() {
  static const int64_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<int64_t>(p) : int64_t{4096};
  }();
  return page;
}

// Gives the pages of [lo, hi) back to the system (rounded inwards to whole
// pages); the range stays mapped and reads as zeros when touched again.
void release_range(char* base, int64_t lo, int64_t hi) {
  const int64_t page = page_size();
  lo = (lo + page - 1) / page * page;
  hi = hi / page * page;
  if (hi > lo) madvise(base + lo, static_cast<size_t>(hi - lo), MADV_DONTNEED);
}

// Called with s->mu held: gives back every page of the region that no live
// block touches (all of them when nothing is live).  A region pinned by a few
// small tensors then costs about their pages, not the whole slab.
void release_unused_pages(SlabMem* s) {
  if (s->base == nullptr || s->plan == nullptr) return;
  const Plan& plan = *s->plan;
  std::vector<std::pair<int64_t, int64_t>> live;  // [offset, offset + size) of live blocks
  for (int64_t k : s->live_at) {
    if (k >= 0) live.emplace_back(plan.offset[k], plan.offset[k] + plan.size[k]);
  }
  std::sort(live.begin(), live.end());
  int64_t at = 0;
  for (const auto& [lo, hi] : live) {
    if (lo > at) release_range(s->base, at, lo);
    at = std::max(at, hi);
  }
  release_range(s->base, at, s->bytes);
}

// Called with s->mu held, when s is retired and holds nothing live.
void slab_release_bytes(SlabMem* s) {
  g_slabs.remove(s);
  // base and bytes keep their values: a concurrent g_slabs.find that loaded this
  // record before the slot was cleared then reads constants, and no pointer
  // being freed can lie in the released range (its slot is cleared before the bytes are).
  munmap(s->base, static_cast<size_t>(s->bytes));
  s->state.clear();
  s->state.shrink_to_fit();
  s->live_at.clear();
  s->live_at.shrink_to_fit();
  s->plan.reset();
}

SlabMem* slab_new(const std::shared_ptr<const Plan>& shared) {
  const Plan& plan = *shared;
  auto* s = new (std::nothrow) SlabMem();
  if (s == nullptr) return nullptr;
  // whole pages from mmap (page-aligned, so 64-byte aligned): unused pages
  // can be given back with madvise while the region stays mapped
  const int64_t page = page_size();
  int64_t bytes = std::max<int64_t>(page, (plan.slab_bytes + page - 1) / page * page);
  void* mem = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    delete s;
    return nullptr;
  }
  s->base = static_cast<char*>(mem);
  std::memset(s->base, 0, static_cast<size_t>(bytes));  // fault the pages in now, not in a pass
  s->bytes = bytes;
  s->plan = shared;
  s->state.assign(static_cast<size_t>(plan.n), 0);
  s->live_at.assign(plan.offsets.size(), -1);
  g_slabs.add(s);
  if (s->slot < 0) {  // every slot taken: no slab
    munmap(s->base, static_cast<size_t>(bytes));
    delete s;
    return nullptr;
  }
  return s;
}

void slab_free(SlabMem* s, void* p) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->plan == nullptr) return;
  const std::vector<int64_t>& offsets = s->plan->offsets;
  const int64_t off = static_cast<char*>(p) - s->base;
  auto it = std::lower_bound(offsets.begin(), offsets.end(), off);
  if (it == offsets.end() || *it != off) return;  // not a block start: nothing to do
  int64_t& live = s->live_at[it - offsets.begin()];
  if (live < 0) return;  // no live block there
  s->state[live] = 2;
  live = -1;
  if (--s->live == 0 && s->retired) slab_release_bytes(s);
}

void slab_delete(void* p) {
  if (SlabMem* s = g_slabs.find(p)) slab_free(s, p);
}

// What Python holds per (plan, thread): the current region, replaced when a
// pass left tensors alive in it.
struct Counters {  // per pass, summed per slab; layout mirrored in Python
  int64_t allocations;
  int64_t from_slab;
  int64_t bytes_from_slab;
  int64_t bytes_from_default;
  int64_t fallback;     // 1 when the pass fell back to the default allocator
  int64_t misses;       // allocations the plan should have served but did not
  int64_t fallback_at;  // allocation index of the fallback, -1 if none
  int64_t reason;       // 0 none, 1 size mismatch, 2 lifetime, 3 more allocations than planned
  int64_t replays;      // passes (1 per pass; summed per slab)
};

void add_counters(Counters& total, const Counters& c) {
  total.allocations += c.allocations;
  total.from_slab += c.from_slab;
  total.bytes_from_slab += c.bytes_from_slab;
  total.bytes_from_default += c.bytes_from_default;
  total.fallback += c.fallback;
  total.misses += c.misses;
  total.replays += c.replays;
  if (c.fallback) {
    total.fallback_at = c.fallback_at;  // the latest fallback's position and reason
    total.reason = c.reason;
  }
}


// A slab in use by a replay is never freed under it: dsa_slab_free then only
// marks it, and the replay's end frees it.
struct Slab {
  std::shared_ptr<const Plan> plan;
  SlabMem* mem = nullptr;
  std::mutex mu;        // guards active / doomed / total
  bool active = false;
  bool doomed = false;
  Counters total{0, 0, 0, 0, 0, 0, -1, 0, 0};
  std::vector<int64_t> escaped;  // slab blocks found alive after a pass, not yet read by Python
};

void retire(SlabMem* s) {
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mu);
  s->retired = true;
  if (s->live == 0) {
    slab_release_bytes(s);
  } else {
    release_unused_pages(s);  // pinned by tensors that escaped: keep only their pages
  }
}


struct Replay {
  Slab* slab;
  const Plan* plan;  // kept alive by slab->plan
  SlabMem* mem;
  int64_t next = 0;    // allocation index in this pass
  int64_t dl_pos = 0;  // position in plan->by_deadline
  bool fallen = false;
  Counters c{};
};

thread_local Replay* t_replay = nullptr;

void fall_back(Replay* r, int64_t index, int64_t reason) {
  r->fallen = true;
  r->c.fallback = 1;
  r->c.fallback_at = index;
  r->c.reason = reason;
}

// ---------------------------------------------------------------- allocator
c10::DataPtr default_alloc(size_t n) { return g_prev->allocate(n); }

c10::DataPtr profile_alloc(Profile* prof, size_t n) {
  if (n == 0) return default_alloc(n);
  c10::DeleterFnPtr deleter = &arena_delete;
  void* p = prof->arena != nullptr ? arena_alloc(prof->arena, n) : nullptr;
  if (p == nullptr) {  // no arena memory: the default allocator, as eager
    c10::DataPtr dp = default_alloc(n);
    p = dp.get();
    if (p == nullptr) return dp;
    dp.release_context();  // ownership moves to the DataPtr below
    deleter = &profiled_delete;
  }
  {
    std::lock_guard<std::mutex> lock(g_prof_mu);
    const int64_t index = static_cast<int64_t>(prof->records.size());
    prof->records.push_back(Record{p, static_cast<int64_t>(n), prof->clock++, -1, t_node, prof->thread});
    g_prof_live[p] = {prof, index};
  }
  return c10::DataPtr(p, p, deleter, c10::Device(c10::DeviceType::CPU));
}

c10::DataPtr replay_alloc(Replay* r, size_t n) {
  const int64_t bytes = static_cast<int64_t>(n);
  if (n == 0) return default_alloc(n);
  r->c.allocations++;
  if (!r->fallen) {
    const Plan& plan = *r->plan;
    const int64_t k = r->next++;
    if (k >= plan.n) {
      fall_back(r, k, 3);
    } else if (plan.size[k] != bytes) {
      fall_back(r, k, 1);
    } else if (plan.offset[k] < 0) {
      r->c.bytes_from_default += bytes;  // escapes the pass by design
      return default_alloc(n);
    } else {
      SlabMem* s = r->mem;
      std::lock_guard<std::mutex> lock(s->mu);
      // every slab block whose planned life ended before allocation k must be gone
      while (r->dl_pos < static_cast<int64_t>(plan.by_deadline.size())) {
        const int64_t i = plan.by_deadline[r->dl_pos];
        if (plan.deadline[i] > k) break;
        if (s->state[i] != 2) {
          fall_back(r, k, 2);
          break;
        }
        r->dl_pos++;
      }
      if (!r->fallen) {
        const int64_t off = plan.offset[k];
        s->state[k] = 1;
        s->live_at[plan.slot[k]] = k;
        s->live++;
        r->c.from_slab++;
        r->c.bytes_from_slab += bytes;
        void* p = s->base + off;
        return c10::DataPtr(p, p, &slab_delete, c10::Device(c10::DeviceType::CPU));
      }
    }
  }
  // fallen back: count what the plan would have served
  r->c.misses++;
  r->c.bytes_from_default += bytes;
  return default_alloc(n);
}

void any_delete(void* p) {
  if (SlabMem* s = g_slabs.find(p)) {
    slab_free(s, p);
    return;
  }
  if (ArenaChunk* k = g_chunks.find(p)) {
    if (g_profiling.load(std::memory_order_acquire) > 0) profile_free(p);
    arena_free(k, p);
    return;
  }
  profiled_delete(p);
}

struct DsaAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (g_sessions.load(std::memory_order_relaxed) != 0) {
      if (Replay* r = t_replay) return replay_alloc(r, n);
      if (Profile* p = t_profile) return profile_alloc(p, n);
      g_other_allocs.fetch_add(1, std::memory_order_relaxed);
      g_other_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    }
    // Passthrough: hand the allocation on untouched, but with our deleter
    // when a session might need to see the free.
    return default_alloc(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &any_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

DsaAllocator g_alloc;
std::once_flag g_install_once;
int g_install_status = -1;
char g_error[512] = "";

void set_error(const char* msg) {
  std::snprintf(g_error, sizeof(g_error), "%s", msg);
}

void install() {
  c10::Allocator* prev = c10::GetCPUAllocator();
  if (prev == &g_alloc) {
    g_install_status = 0;
    return;
  }
  c10::DataPtr probe = prev->allocate(kAlign);
  if (probe.get() != probe.get_context()) {
    set_error("the current CPU allocator's DataPtr context differs from its data; cannot wrap it");
    g_install_status = 2;
    return;
  }
  if (prev->raw_deleter() == nullptr) {
    set_error("the current CPU allocator has no raw deleter; cannot wrap it");
    g_install_status = 3;
    return;
  }
  g_prev = prev;
  g_prev_delete = prev->raw_deleter();
  c10::SetCPUAllocator(&g_alloc, 255);
  if (c10::GetCPUAllocator() != &g_alloc) {
    set_error("c10::SetCPUAllocator did not take effect (another allocator holds priority 255)");
    g_install_status = 4;
    return;
  }
  g_install_status = 0;
}

// Takes a fresh region when the current one still holds live blocks.
int replay_open(Slab* slab, void** session) {
  bool fresh = slab->mem == nullptr;
  if (!fresh) {
    std::lock_guard<std::mutex> lock(slab->mem->mu);
    fresh = slab->mem->live != 0;  // tensors of an earlier pass still live there
  }
  if (fresh) {
    retire(slab->mem);
    slab->mem = slab_new(slab->plan);
    if (slab->mem == nullptr) return 2;
  } else {
    std::lock_guard<std::mutex> lock(slab->mem->mu);
    std::fill(slab->mem->state.begin(), slab->mem->state.end(), 0);
  }
  auto* r = new (std::nothrow) Replay{slab, slab->plan.get(), slab->mem};
  if (r == nullptr) return 2;
  r->c.fallback_at = -1;
  r->c.replays = 1;
  t_replay = r;
  g_sessions.fetch_add(1, std::memory_order_acq_rel);
  *session = r;
  return 0;
}

}  // namespace

// ---------------------------------------------------------------- C interface
// Built with -fvisibility=hidden: only this block is exported.
#pragma GCC visibility push(default)
extern "C" {

int dsa_abi_version() { return 5; }

const char* dsa_last_error() { return g_error; }

// 0 on success.  Idempotent; the allocator is never uninstalled.
int dsa_install() {
  try {
    std::call_once(g_install_once, install);
  } catch (const std::exception& e) {
    set_error(e.what());
    g_install_status = 1;
  }
  return g_install_status;
}

// Allocations (out[0]) and bytes (out[1]) that threads without a session made
// while some session was open; they went to the default allocator.
void dsa_other_threads(int64_t* out) {
  out[0] = g_other_allocs.load(std::memory_order_relaxed);
  out[1] = g_other_bytes.load(std::memory_order_relaxed);
}

// Asks the process's malloc to give the memory it holds free back to the
// system: called after a profiled pass (which ran on the default allocator)
// and before its slab is made, so that the slab does not come on top of the
// pass's freed memory.  tcmalloc (gperftools) and jemalloc are found by their
// own entry points when they are preloaded; glibc's malloc_trim otherwise.
// Returns which one ran: 1 tcmalloc, 2 jemalloc, 3 glibc, 0 none.
int dsa_release_free_memory() {
  using ReleaseFn = void (*)();
  using MallctlFn = int (*)(const char*, void*, size_t*, void*, size_t);
  if (auto release = reinterpret_cast<ReleaseFn>(dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"))) {
    release();
    return 1;
  }
  if (auto mallctl = reinterpret_cast<MallctlFn>(dlsym(RTLD_DEFAULT, "mallctl"))) {
    // MALLCTL_ARENAS_ALL is 4096: purge the unused dirty pages of every arena
    return mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) == 0 ? 2 : 0;
  }
#ifdef __GLIBC__
  malloc_trim(0);
  return 3;
#else
  return 0;
#endif
}

// The number of profile-arena chunks mapped now (for tests: an arena is
// unmapped when its pass has ended and its last block died).
int dsa_profile_arena_chunks() {
  return g_chunks.size();
}

// A session already open on this thread (profile or replay)?
int dsa_thread_busy() { return (t_profile != nullptr || t_replay != nullptr) ? 1 : 0; }

// ---- profiling
// With op_stacks 0 no RecordFunction callback is added: every record's node is
// 0 (no stack), and the pass runs on torch's fast dispatch path.
void* dsa_profile_begin(int op_stacks) {
  if (g_install_status != 0 || t_profile != nullptr || t_replay != nullptr) return nullptr;
  auto* prof = new (std::nothrow) Profile();
  if (prof == nullptr) return nullptr;
  prof->thread = this_thread_id();
  prof->op_stacks = op_stacks != 0;
  static const bool use_arena = [] {
    const char* env = std::getenv("DSA_PROFILE_ARENA");  // "0": profile on the default allocator
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  if (use_arena) prof->arena = new (std::nothrow) Arena();  // never freed: emptied when unmapped
  try {
    if (prof->op_stacks) callback_acquire();
  } catch (const std::exception& e) {
    set_error(e.what());
    delete prof;
    return nullptr;
  }
  t_node = 0;
  t_profile = prof;
  g_profiling.fetch_add(1, std::memory_order_acq_rel);
  g_sessions.fetch_add(1, std::memory_order_acq_rel);
  return prof;
}

// Ends the session opened on this thread; returns the number of records.
// Blocks still live are detached from the profile (their end stays -1).
int64_t dsa_profile_end(void* handle) {
  auto* prof = static_cast<Profile*>(handle);
  if (prof == nullptr || t_profile != prof) return -1;
  t_profile = nullptr;
  t_node = 0;
  {
    std::lock_guard<std::mutex> lock(g_prof_mu);
    for (const Record& rec : prof->records) {
      if (rec.end < 0) g_prof_live.erase(rec.ptr);
    }
  }
  g_sessions.fetch_sub(1, std::memory_order_acq_rel);
  g_profiling.fetch_sub(1, std::memory_order_acq_rel);
  if (prof->op_stacks) callback_release();
  if (prof->arena != nullptr) arena_retire(prof->arena);
  return static_cast<int64_t>(prof->records.size());
}

int64_t dsa_profile_clock(void* handle) {
  auto* prof = static_cast<Profile*>(handle);
  std::lock_guard<std::mutex> lock(g_prof_mu);
  return prof->clock;
}

// Copies the records out of an ended profile into caller-owned arrays.
void dsa_profile_copy(void* handle, int64_t* size, int64_t* start, int64_t* end,
                      int32_t* node, uint64_t* thread) {
  auto* prof = static_cast<Profile*>(handle);
  std::lock_guard<std::mutex> lock(g_prof_mu);
  for (size_t i = 0; i < prof->records.size(); ++i) {
    const Record& r = prof->records[i];
    size[i] = r.size;
    start[i] = r.start;
    end[i] = r.end;
    node[i] = r.node;
    thread[i] = r.thread;
  }
}

void dsa_profile_free(void* handle) { delete static_cast<Profile*>(handle); }

// ---- op-stack trie
int32_t dsa_trie_size() {
  std::lock_guard<std::mutex> lock(g_trie_mu);
  return static_cast<int32_t>(g_node_parent.size());
}

// Copies min(n, size) nodes: parent node and name index per node.
void dsa_trie_copy(int32_t n, int32_t* parent, int32_t* name) {
  std::lock_guard<std::mutex> lock(g_trie_mu);
  const int32_t m = std::min<int32_t>(n, static_cast<int32_t>(g_node_parent.size()));
  for (int32_t i = 0; i < m; ++i) {
    parent[i] = g_node_parent[i];
    name[i] = g_node_name[i];
  }
}

// The name with this index, or nullptr; the string lives as long as the process.
const char* dsa_trie_name(int32_t index) {
  std::lock_guard<std::mutex> lock(g_trie_mu);
  if (index < 0 || index >= static_cast<int32_t>(g_names.size())) return nullptr;
  return g_names[index].c_str();
}

// ---- plans and slabs
// offset[i] = -1 sends allocation i to the default allocator.  Deadlines are
// computed by the caller: the index of the first allocation after i's free.
void* dsa_plan_new(int64_t n, const int64_t* size, const int64_t* offset,
                   const int64_t* deadline, int64_t slab_bytes) {
  try {
    auto* plan = new Plan();
    plan->n = n;
    plan->size.assign(size, size + n);
    plan->offset.assign(offset, offset + n);
    plan->deadline.assign(deadline, deadline + n);
    plan->slab_bytes = slab_bytes;
    for (int64_t i = 0; i < n; ++i) {
      if (offset[i] >= 0) {
        plan->by_deadline.push_back(i);
        plan->offsets.push_back(offset[i]);
      }
    }
    std::sort(plan->offsets.begin(), plan->offsets.end());
    plan->offsets.erase(std::unique(plan->offsets.begin(), plan->offsets.end()), plan->offsets.end());
    plan->slot.assign(static_cast<size_t>(n), -1);
    for (int64_t i = 0; i < n; ++i) {
      if (offset[i] >= 0) {
        plan->slot[i] = std::lower_bound(plan->offsets.begin(), plan->offsets.end(), offset[i]) -
                        plan->offsets.begin();
      }
    }
    std::stable_sort(plan->by_deadline.begin(), plan->by_deadline.end(),
                     [plan](int64_t a, int64_t b) { return plan->deadline[a] < plan->deadline[b]; });
    return new std::shared_ptr<const Plan>(plan);
  } catch (const std::exception& e) {
    set_error(e.what());
    return nullptr;
  }
}

void dsa_plan_free(void* handle) { delete static_cast<std::shared_ptr<const Plan>*>(handle); }

void* dsa_slab_new(void* plan_handle) {
  try {
    auto* slab = new Slab();
    slab->plan = *static_cast<std::shared_ptr<const Plan>*>(plan_handle);
    return slab;
  } catch (const std::exception& e) {
    set_error(e.what());
    return nullptr;
  }
}

// Releases the slab's region (now, or when its last live block dies) and its
// plan.  The small Slab record itself stays valid, so a thread that still
// holds the handle gets nullptr from dsa_replay_begin instead of a dangling
// pointer; while a pass uses the slab, dsa_replay_end does the release.
void dsa_slab_free(void* handle) {
  auto* slab = static_cast<Slab*>(handle);
  std::lock_guard<std::mutex> lock(slab->mu);
  if (slab->doomed) return;
  slab->doomed = true;
  if (!slab->active) {
    retire(slab->mem);
    slab->mem = nullptr;
    slab->plan.reset();
  }
}

// Opens a replay session on this thread and returns it; nullptr when the
// thread is busy, the slab is in use, or no region could be allocated (the
// pass then runs eagerly).
void* dsa_replay_begin(void* handle) {
  void* session = nullptr;
  auto* slab = static_cast<Slab*>(handle);
  if (g_install_status != 0 || t_profile != nullptr || t_replay != nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> lock(slab->mu);
    if (slab->active || slab->doomed) return nullptr;  // one pass per slab at a time
    slab->active = true;
  }
  if (replay_open(slab, &session) != 0) {
    std::lock_guard<std::mutex> lock(slab->mu);
    slab->active = false;
    return nullptr;
  }
  return session;
}

// Copies up to cap escaped allocation indices (recorded by dsa_replay_end)
// into out and forgets them; returns how many there were.  out may be null
// (cap 0) to count them.
int64_t dsa_slab_escaped(void* handle, int64_t* out, int64_t cap) {
  auto* slab = static_cast<Slab*>(handle);
  std::lock_guard<std::mutex> lock(slab->mu);
  const int64_t n = static_cast<int64_t>(slab->escaped.size());
  if (out != nullptr && cap > 0) {
    std::copy_n(slab->escaped.begin(), std::min(n, cap), out);
    slab->escaped.clear();
  }
  return n;
}

// Gives the memory of an idle slab's region back to the system: its pages
// are released (the region stays mapped and faults in again at the next
// pass), or, if tensors of an earlier pass still live in it, the region is
// retired (freed when they die; only their pages stay).  Returns the bytes
// given back; 0 when the slab is in a pass, freed, or holds no region.
int64_t dsa_slab_trim(void* handle) {
  auto* slab = static_cast<Slab*>(handle);
  std::lock_guard<std::mutex> lock(slab->mu);
  if (slab->active || slab->doomed || slab->mem == nullptr) return 0;
  SlabMem* s = slab->mem;
  const int64_t bytes = s->bytes;
  bool pinned;
  {
    std::lock_guard<std::mutex> mem_lock(s->mu);
    pinned = s->live != 0;
    if (!pinned) release_unused_pages(s);
  }
  if (pinned) {
    retire(s);
    slab->mem = nullptr;
  }
  return bytes;
}

// The counters summed over the slab's passes.
void dsa_slab_counters(void* handle, Counters* out) {
  auto* slab = static_cast<Slab*>(handle);
  std::lock_guard<std::mutex> lock(slab->mu);
  *out = slab->total;
}

// Closes the replay session of this thread and adds its counters to the
// slab's.  Returns the fallback reason of the pass (0: it followed the plan),
// with kEscaped added when slab blocks outlived the pass (read them with
// dsa_slab_escaped), or -1 when no session of this thread was given.
int dsa_replay_end(void* session) {
  auto* r = static_cast<Replay*>(session);
  if (r == nullptr || t_replay != r) return -1;
  t_replay = nullptr;
  g_sessions.fetch_sub(1, std::memory_order_acq_rel);
  int reason = static_cast<int>(r->c.reason);
  Slab* slab = r->slab;
  // Slab blocks still alive now escaped the pass (an output the profiled pass
  // freed, e.g. on another branch): they pin this region, and Python learns
  // their indices so that the next plan serves them from the default allocator.
  std::vector<int64_t> escaped;
  {
    SlabMem* s = r->mem;
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->live > 0) {
      for (int64_t k : s->live_at) {
        if (k >= 0) escaped.push_back(k);
      }
    }
  }
  bool doomed;
  {
    std::lock_guard<std::mutex> lock(slab->mu);
    if (!escaped.empty()) {
      reason |= kEscaped;
      slab->escaped.insert(slab->escaped.end(), escaped.begin(), escaped.end());
    }
    add_counters(slab->total, r->c);
    slab->active = false;
    doomed = slab->doomed;
  }
  delete r;
  if (doomed) {
    std::lock_guard<std::mutex> lock(slab->mu);
    retire(slab->mem);
    slab->mem = nullptr;
    slab->plan.reset();
  }
  return reason;
}

}  // extern "C"
#pragma GCC visibility pop
