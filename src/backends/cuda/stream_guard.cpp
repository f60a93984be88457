#include "baton/cuda/stream_guard.h"

namespace baton::cuda {
namespace {

thread_local const StreamGuard* t_current = nullptr;

}  // namespace

StreamGuard::StreamGuard(cudaStream_t stream) : stream_(stream), previous_(t_current) {
  t_current = this;
}

StreamGuard::~StreamGuard() { t_current = previous_; }

const StreamGuard* current_stream_guard() { return t_current; }

}  // namespace baton::cuda
