// Lock discipline the compiler checks: clang's thread-safety analysis
// (-Wthread-safety, on in every clang build through nanokv_warnings; CI's
// fuzz build is one), as LevelDB does with its port/thread_annotations.h.
// A member marked NANOKV_GUARDED_BY(mu_) may be touched only with mu_ held,
// a function marked NANOKV_REQUIRES(mu_) called only so; GCC ignores the
// marks. std::mutex carries no capability in libstdc++, so code that wants
// the check locks a nanokv::gpu::Mutex through a MutexLock.
//
// Constructors and destructors are not checked (clang's rule): an object
// nobody else can see yet, or any more, needs no lock.
#ifndef NANOKV_GPU_THREAD_ANNOTATIONS_H_
#define NANOKV_GPU_THREAD_ANNOTATIONS_H_

#include <mutex>

#if defined(__clang__)
#define NANOKV_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define NANOKV_THREAD_ANNOTATION_(x)
#endif

#define NANOKV_CAPABILITY(x) NANOKV_THREAD_ANNOTATION_(capability(x))
#define NANOKV_SCOPED_CAPABILITY NANOKV_THREAD_ANNOTATION_(scoped_lockable)
#define NANOKV_GUARDED_BY(x) NANOKV_THREAD_ANNOTATION_(guarded_by(x))
#define NANOKV_REQUIRES(...) NANOKV_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define NANOKV_ACQUIRE(...) NANOKV_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define NANOKV_RELEASE(...) NANOKV_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define NANOKV_EXCLUDES(...) NANOKV_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

namespace nanokv::gpu {

// A std::mutex the analysis knows as a capability.
class NANOKV_CAPABILITY("mutex") Mutex {
 public:
  void lock() NANOKV_ACQUIRE() { mu_.lock(); }
  void unlock() NANOKV_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope, as std::lock_guard does.
// `mu` must remain live while this MutexLock is in use.
class NANOKV_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) NANOKV_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() NANOKV_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace nanokv::gpu

#endif  // NANOKV_GPU_THREAD_ANNOTATIONS_H_
