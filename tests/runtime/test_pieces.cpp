// Tiles run in pieces (Job::pieces, runtime/help_board.h): every piece once, between the
// tile's begin and end, its parents finished; idle workers take pieces of a running tile, so
// a slow core no longer holds half of every op; a throwing piece fails the job.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

#include "runtime/help_board.h"
#include "test_dags.h"

namespace grove::test {
namespace {

// Each tile in `pieces` pieces. Checks the order of begin, pieces and end per tile and that
// parents finished first; counts the pieces each worker ran.
class PieceJob : public Job {
 public:
  PieceJob(const TestDag& dag, int pieces, int worker_slots, std::chrono::microseconds piece_time = {})
      : dag_(dag),
        pieces_(pieces),
        slots_(worker_slots),
        piece_time_(piece_time),
        ran_(new std::atomic<int32_t>[static_cast<size_t>(dag.size() * pieces)]()),
        begun_(new std::atomic<int32_t>[static_cast<size_t>(dag.size())]()),
        ended_(new std::atomic<int32_t>[static_cast<size_t>(dag.size())]()),
        owner_(new std::atomic<int32_t>[static_cast<size_t>(dag.size())]()),
        by_worker_(new std::atomic<int32_t>[static_cast<size_t>(worker_slots)]()) {}

  DagView dag() const override { return dag_.view(); }
  void run_tile(int32_t, int) override { whole_.fetch_add(1); }
  int pieces(int32_t) const override { return pieces_; }
  void begin_pieces(int32_t tile, int worker) override {
    owner_[tile].store(worker, std::memory_order_relaxed);
    for (int32_t p : dag_.parents[static_cast<size_t>(tile)])
      if (ended_[p].load(std::memory_order_acquire) != 1) wrong_.fetch_add(1);
    begun_[tile].fetch_add(1, std::memory_order_release);
  }
  void run_pieces(int32_t tile, int first, int end, int pieces, int worker) override {
    if (pieces != pieces_ || first < 0 || end <= first || end > pieces || worker < 0 || worker >= slots_ ||
        begun_[tile].load(std::memory_order_acquire) != 1 || ended_[tile].load(std::memory_order_acquire) != 0)
      wrong_.fetch_add(1);
    for (int piece = std::max(first, 0); piece < std::min(end, pieces_); ++piece) {
      if (piece_time_.count() > 0) {  // a stream of a few microseconds, as a weight slice is
        const auto until = std::chrono::steady_clock::now() + piece_time_;
        while (std::chrono::steady_clock::now() < until) {
        }
      }
      ran_[static_cast<size_t>(tile) * pieces_ + piece].fetch_add(1, std::memory_order_release);
      by_worker_[worker].fetch_add(1);
      if (owner_[tile].load(std::memory_order_relaxed) != worker) helped_.fetch_add(1);
    }
    calls_.fetch_add(1);
  }
  void end_pieces(int32_t tile, int) override {
    for (int p = 0; p < pieces_; ++p)
      if (ran_[static_cast<size_t>(tile) * pieces_ + p].load(std::memory_order_acquire) != 1) wrong_.fetch_add(1);
    ended_[tile].fetch_add(1, std::memory_order_release);
  }

  int32_t pieces_not_run_once() const {
    int32_t bad = 0;
    for (int32_t i = 0; i < dag_.size() * pieces_; ++i) bad += ran_[i].load() != 1;
    for (int32_t t = 0; t < dag_.size(); ++t) bad += begun_[t].load() != 1 || ended_[t].load() != 1;
    return bad;
  }
  int32_t wrong() const { return wrong_.load(); }
  int32_t whole() const { return whole_.load(); }
  int32_t began(int32_t tile) const { return begun_[tile].load(); }
  int32_t by_worker(int w) const { return by_worker_[w].load(); }
  int32_t helped() const { return helped_.load(); }
  int32_t calls() const { return calls_.load(); }  // pieces run by a worker other than the tile's

 private:
  const TestDag& dag_;
  int pieces_, slots_;
  std::chrono::microseconds piece_time_;
  std::unique_ptr<std::atomic<int32_t>[]> ran_, begun_, ended_, owner_, by_worker_;
  std::atomic<int32_t> wrong_{0}, whole_{0}, helped_{0}, calls_{0};
};

TEST(Pieces, EveryPieceRunsOnceBetweenItsTilesBeginAndEnd) {
  std::vector<TestDag> dags = all_shapes();
  for (int threads : {1, 2, 3, 8})
    for (int pieces : {2, 5, kMaxTilePieces}) {
      Engine engine(EngineOptions{.threads = threads});
      for (const TestDag& dag : dags) {
        auto job = std::make_shared<PieceJob>(dag, pieces, worker_slots(engine));
        run_job(engine, job);
        EXPECT_EQ(job->pieces_not_run_once(), 0) << dag.name << " threads " << threads << " pieces " << pieces;
        EXPECT_EQ(job->wrong(), 0) << dag.name << " threads " << threads << " pieces " << pieces;
        EXPECT_EQ(job->whole(), 0) << dag.name;
      }
    }
}

// Each take is half of what is left: alone, a worker runs a tile of P pieces in about
// log2(P) calls (a kernel call costs its set-up), not P.
TEST(Pieces, AWorkerAloneTakesHalfOfWhatIsLeftEachTime) {
  TestDag dag = chain(10);
  Engine engine(EngineOptions{.threads = 1});
  auto job = std::make_shared<PieceJob>(dag, 64, worker_slots(engine));
  run_job(engine, job);
  EXPECT_EQ(job->pieces_not_run_once(), 0);
  EXPECT_EQ(job->calls(), 10 * 7);  // 32, 16, 8, 4, 2, 1, 1
}

// A chain leaves every core but the one running its tile idle: those take its pieces, so
// pieces of one tile run on several workers. On a loaded machine (sharded sanitizer runs) the
// other thread may not get a core during one job, so jobs are run until one is helped.
TEST(Pieces, IdleWorkersTakePiecesOfARunningTile) {
  TestDag dag = chain(40);
  Engine engine = make_engine({.threads = 2}, {.slow_worker = 10.0});
  int32_t helped = 0;
  for (int attempt = 0; attempt < 50 && helped == 0; ++attempt) {
    auto job = std::make_shared<PieceJob>(dag, 16, worker_slots(engine), std::chrono::microseconds(20));
    run_job(engine, job);
    EXPECT_EQ(job->pieces_not_run_once(), 0);
    EXPECT_EQ(job->wrong(), 0);
    helped = job->helped();
  }
  EXPECT_GT(helped, 0) << "no piece ran on a worker other than its tile's in 50 jobs";
}

// A piece that throws fails the job with its exception; the pieces not yet started are
// skipped, and nothing after the tile in the chain starts.
class ThrowingPieceJob : public PieceJob {
 public:
  using PieceJob::PieceJob;
  void run_pieces(int32_t tile, int first, int end, int pieces, int worker) override {
    PieceJob::run_pieces(tile, first, end, pieces, worker);
    if (tile == 3 && first <= 2 && 2 < end) throw std::runtime_error("piece 2 of tile 3 failed");
  }
};

TEST(Pieces, AThrowingPieceFailsTheJob) {
  TestDag dag = chain(10);
  for (int threads : {1, 2, 3}) {
    Engine engine(EngineOptions{.threads = threads});
    auto job = std::make_shared<ThrowingPieceJob>(dag, 4, worker_slots(engine));
    try {
      run_job(engine, job);
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "piece 2 of tile 3 failed");
    }
    for (int32_t t = 0; t <= 3; ++t) EXPECT_EQ(job->began(t), 1) << t;
    for (int32_t t = 4; t < 10; ++t) EXPECT_EQ(job->began(t), 0) << t;
    int32_t pieces = 0;
    for (int w = 0; w < worker_slots(engine); ++w) pieces += job->by_worker(w);
    EXPECT_GE(pieces, 3 * 4 + 1);  // tiles 0-2 whole, and tile 3's run with its failing piece
    EXPECT_LE(pieces, 4 * 4);
  }
}

}  // namespace
}  // namespace grove::test
