// libfaketime keeps a process's state in two POSIX shared-memory objects
// named for its pid (/dev/shm/faketime_shm_<pid> and sem.faketime_sem_<pid>)
// and removes them in a destructor: a process that ends without running it
// (killed, or ended by _exit) leaves them behind, on every test run.
#pragma once

#include <semaphore.h>
#include <sys/mman.h>
#include <sys/types.h>

#include <string>

namespace ratchet::testing {

// Removes what libfaketime left of the process `pid`, once it has ended.
inline void remove_faketime_objects(pid_t pid) {
  const std::string id = std::to_string(pid);
  (void)::shm_unlink(("/faketime_shm_" + id).c_str());
  (void)::sem_unlink(("/faketime_sem_" + id).c_str());
}

}  // namespace ratchet::testing
