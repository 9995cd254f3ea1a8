#include "parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mf {
namespace {

int default_threads() {
    if (const char* env = std::getenv("MIME_FAST_NUM_THREADS")) {
        const int n = std::atoi(env);
        if (n > 0) return n;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw ? static_cast<int>(hw) : 1;
}

thread_local bool t_in_worker = false;

class Pool {
public:
    static Pool& instance() {
        static Pool pool;
        return pool;
    }

    int size() const { return wanted_.load(); }
    void resize(int n) { wanted_.store(n > 0 ? n : default_threads()); }

    void run(int n, int grain, const std::function<void(int, int)>& body) {
        const int threads = std::max(1, std::min(size(), (n + std::max(grain, 1) - 1) / std::max(grain, 1)));
        if (threads <= 1 || t_in_worker) {
            body(0, n);
            return;
        }
        std::lock_guard<std::mutex> region(region_mutex_);
        ensure_workers(threads - 1);
        // Dynamic chunks of `grain` items: rows near a mask cost far more than rows away from it.
        const int step = std::max(grain, 1);
        std::atomic<int> next{0};
        std::exception_ptr error;
        std::mutex error_mutex;
        std::atomic<int> remaining{threads - 1};
        auto chunk = [&](int) {
            try {
                for (;;) {
                    const int b = next.fetch_add(step);
                    if (b >= n) break;
                    body(b, std::min(n, b + step));
                }
            } catch (...) {
                std::lock_guard<std::mutex> lk(error_mutex);
                if (!error) error = std::current_exception();
                next.store(n);
            }
        };
        {
            std::lock_guard<std::mutex> lk(mutex_);
            task_ = [&](int worker) { chunk(worker + 1); };
            active_ = threads - 1;
            remaining_ = &remaining;
            ++generation_;
        }
        cv_.notify_all();
        t_in_worker = true;
        chunk(0);
        t_in_worker = false;
        {
            std::unique_lock<std::mutex> lk(mutex_);
            done_cv_.wait(lk, [&] { return remaining.load() == 0; });
            task_ = nullptr;
        }
        if (error) std::rethrow_exception(error);
    }

    ~Pool() {
        {
            std::lock_guard<std::mutex> lk(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
    }

private:
    Pool() : wanted_(default_threads()) {}

    void ensure_workers(int count) {
        while (static_cast<int>(workers_.size()) < count) {
            const int index = static_cast<int>(workers_.size());
            workers_.emplace_back([this, index] { worker_loop(index); });
        }
    }

    void worker_loop(int index) {
        t_in_worker = true;
        unsigned long seen = 0;
        for (;;) {
            std::function<void(int)> task;
            std::atomic<int>* remaining = nullptr;
            {
                std::unique_lock<std::mutex> lk(mutex_);
                cv_.wait(lk, [&] { return stop_ || (generation_ != seen && index < active_); });
                if (stop_) return;
                seen = generation_;
                task = task_;
                remaining = remaining_;
            }
            task(index);
            if (remaining->fetch_sub(1) == 1) {
                std::lock_guard<std::mutex> lk(mutex_);
                done_cv_.notify_all();
            }
        }
    }

    std::atomic<int> wanted_;
    std::mutex region_mutex_;
    std::mutex mutex_;
    std::condition_variable cv_, done_cv_;
    std::vector<std::thread> workers_;
    std::function<void(int)> task_;
    std::atomic<int>* remaining_ = nullptr;
    unsigned long generation_ = 0;
    int active_ = 0;
    bool stop_ = false;
};

}  // namespace

int num_threads() { return Pool::instance().size(); }
void set_num_threads(int n) { Pool::instance().resize(n); }

void parallel_for(int n, int grain, const std::function<void(int, int)>& body) {
    if (n <= 0) return;
    Pool::instance().run(n, grain, body);
}

}  // namespace mf
