// Clang's thread-safety analysis (-Wthread-safety): which mutex guards which data, and
// which functions must be called with it held, written where the compiler can check them.
// Other compilers see plain code. The ctest `thread_safety.ctld` compiles the controller
// with clang and fails on any finding.
#pragma once

#include <mutex>

#if defined(__clang__)
#define CORRAL_TSA(x) __attribute__((x))
#else
#define CORRAL_TSA(x)
#endif

#define CORRAL_CAPABILITY(name) CORRAL_TSA(capability(name))
#define CORRAL_SCOPED_CAPABILITY CORRAL_TSA(scoped_lockable)
#define CORRAL_GUARDED_BY(m) CORRAL_TSA(guarded_by(m))
#define CORRAL_REQUIRES(...) CORRAL_TSA(requires_capability(__VA_ARGS__))
#define CORRAL_EXCLUDES(...) CORRAL_TSA(locks_excluded(__VA_ARGS__))
#define CORRAL_ACQUIRE(...) CORRAL_TSA(acquire_capability(__VA_ARGS__))
#define CORRAL_RELEASE(...) CORRAL_TSA(release_capability(__VA_ARGS__))
#define CORRAL_ASSERT_HELD(...) CORRAL_TSA(assert_capability(__VA_ARGS__))

namespace corral {

// std::mutex as a capability the analysis knows.
class CORRAL_CAPABILITY("mutex") Mutex {
 public:
  void lock() CORRAL_ACQUIRE() { mu_.lock(); }
  void unlock() CORRAL_RELEASE() { mu_.unlock(); }
  // For code the analysis cannot follow (a callback run under the lock): states that the
  // caller holds it.
  void assert_held() const CORRAL_ASSERT_HELD() {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class CORRAL_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) CORRAL_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() CORRAL_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  // For std::condition_variable's waits, which release and retake the lock inside (the
  // analysis takes it as held throughout, which is what the caller sees).
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace corral
