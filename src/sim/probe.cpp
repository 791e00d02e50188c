#include "sim/probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "grove/engine.h"
#include "runtime/cores.h"
#include "runtime/parker.h"
#include "runtime/ready_pool.h"
#include "runtime/worker.h"

namespace grove {

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t) { return std::chrono::duration<double, std::nano>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Bytes/ns of `threads` threads each copying its own slice of a buffer well past the caches
// (read + write counted), best of a few tries.
double copy_bandwidth(int threads) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const size_t slice = bytes / static_cast<size_t>(threads);
  double best = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    auto t0 = Clock::now();
    for (int i = 0; i < threads; ++i)
      pool.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < threads) cpu_relax();
        std::memcpy(dst.data() + slice * i, src.data() + slice * i, slice);
      });
    for (auto& t : pool) t.join();
    best = std::max(best, 2.0 * static_cast<double>(slice * threads) / ns_since(t0));
  }
  return best;
}

// ns per push and per pop of `threads` threads all using row 0's first queue.
std::pair<double, double> pool_costs(int threads) {
  ReadyPool pool(std::max(threads, 1), PriorityPolicy{});
  const int rounds = 20000, batch = 8;
  std::vector<double> push_ns(static_cast<size_t>(threads)), pop_ns(static_cast<size_t>(threads));
  std::atomic<int> ready{0};
  std::vector<std::thread> pool_threads;
  for (int i = 0; i < threads; ++i)
    pool_threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < threads) cpu_relax();
      ReadyTile one{nullptr, 0, 0}, out;
      double push = 0, pop = 0;
      for (int r = 0; r < rounds / batch; ++r) {
        auto t = Clock::now();
        for (int k = 0; k < batch; ++k) pool.push(0, {&one, 1});
        push += ns_since(t);
        t = Clock::now();
        for (int k = 0; k < batch; ++k) pool.try_pop(0, out);
        pop += ns_since(t);
      }
      push_ns[static_cast<size_t>(i)] = push / rounds;
      pop_ns[static_cast<size_t>(i)] = pop / rounds;
    });
  for (auto& t : pool_threads) t.join();
  return {median(push_ns), median(pop_ns)};
}

double wake_latency() {
  Parker parker;
  std::atomic<int> stage{0};
  std::atomic<int64_t> woke_ns{0};
  std::vector<double> samples;
  std::thread sleeper([&] {
    for (int i = 0; i < 31; ++i) {
      uint32_t epoch = parker.prepare();
      stage.store(1);
      parker.wait(epoch);
      woke_ns.store(Clock::now().time_since_epoch().count());
      stage.store(2);
      while (stage.load() != 0) cpu_relax();
    }
  });
  for (int i = 0; i < 31; ++i) {
    while (stage.load() != 1) cpu_relax();
    std::this_thread::sleep_for(std::chrono::microseconds(300));  // asleep in the kernel by now
    auto t0 = Clock::now();
    parker.notify(1);
    while (stage.load() != 2) cpu_relax();
    samples.push_back(static_cast<double>(woke_ns.load() - t0.time_since_epoch().count()));
    stage.store(0);
  }
  sleeper.join();
  return median(samples);
}

double spin_time(int rows) {
  ReadyPool pool(rows, PriorityPolicy{});
  ReadyTile out;
  std::vector<double> samples;
  for (int i = 0; i < 15; ++i) {
    auto t = Clock::now();
    for (int scan = 0; scan < kSpinScans; ++scan) {
      pool.try_pop(0, out);
      for (int p = 0; p < kPausesPerScan; ++p) cpu_relax();
    }
    samples.push_back(ns_since(t));
  }
  return median(samples);
}

// ns per byte that one thread pays to read a buffer another thread has just written on
// another CPU, over what it pays to read it again from its own cache: a tile reading a
// producer tile's output that ran on another core. Both threads are pinned to two different
// allowed CPUs; the buffer is the size of a typical tile's input.
double cross_core_read() {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) return 0;
  const size_t floats = size_t{128} << 10;  // 512 KiB
  std::vector<float> buffer(floats, 1.0f);
  std::atomic<int> turn{0};  // even: the writer's, odd: the reader's
  std::vector<double> samples;
  constexpr int kTries = 9;
  std::thread writer([&] {
    pin_current_thread(cpus[0]);
    for (int i = 0; i < kTries; ++i) {
      while (turn.load() != 2 * i) cpu_relax();
      for (size_t k = 0; k < floats; ++k) buffer[k] = static_cast<float>(k + static_cast<size_t>(i));
      turn.store(2 * i + 1);
    }
  });
  std::thread reader([&] {
    pin_current_thread(cpus[1]);
    auto read = [&] {
      auto t = Clock::now();
      float sum = 0;
      for (size_t k = 0; k < floats; k += 16) sum += buffer[k];  // one float per cache line
      volatile float keep = sum;
      (void)keep;
      return ns_since(t);
    };
    for (int i = 0; i < kTries; ++i) {
      while (turn.load() != 2 * i + 1) cpu_relax();
      const double cross = read(), local = read();
      samples.push_back(std::max(0.0, cross - local) / static_cast<double>(floats * sizeof(float)));
      turn.store(2 * i + 2);
    }
  });
  writer.join();
  reader.join();
  return median(samples);
}

}  // namespace

MachineProbe probe_machine(int cores) {
  MachineProbe p;
  p.cores = std::max(cores, 1);
  p.bandwidth_one = copy_bandwidth(1);
  p.bandwidth_all = p.cores > 1 ? copy_bandwidth(p.cores) : p.bandwidth_one;
  // Medians of several tries: whether the threads of one try overlap varies from try to try.
  std::vector<double> push, pop, grown;
  for (int i = 0; i < 7; ++i) {
    auto [push_1, pop_1] = pool_costs(1);
    push.push_back(push_1);
    pop.push_back(pop_1);
    if (p.cores > 1) {
      auto [push_n, pop_n] = pool_costs(p.cores);
      grown.push_back((push_n + pop_n) / std::max(push_1 + pop_1, 1e-3) - 1.0);
    }
  }
  p.push_ns = median(push);
  p.pop_ns = median(pop);
  if (p.cores > 1) p.contention = std::max(0.0, median(grown) / (p.cores - 1));
  p.wake_ns = wake_latency();
  p.spin_ns = spin_time(p.cores);
  if (p.cores > 1) p.cross_ns_per_byte = cross_core_read();
  return p;
}

SimMachine sim_machine(const MachineProbe& probe, int cores, double bandwidth) {
  SimMachine m;
  m.cores = cores;
  m.bandwidth_bytes_per_ns = bandwidth;
  m.push_ns = probe.push_ns;
  m.pop_ns = probe.pop_ns;
  m.contention = probe.contention;
  m.wake_ns = probe.wake_ns;
  // During a run a worker spins the engine's busy spin before it parks, not just the probed
  // passes (EngineOptions::busy_spin_ms; the simulated engine's threads fit its cores).
  m.spin_ns = std::max(probe.spin_ns, EngineOptions{}.busy_spin_ms * 1e6);
  m.cross_ns_per_byte = probe.cross_ns_per_byte;
  return m;
}

}  // namespace grove
