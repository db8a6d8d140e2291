// A server that keeps a client's retry waiting, for the packed LWE and bag clients' tests: it
// forwards every call to a real server until armed; then it answers each query ABORTED (the
// session's keys evicted) after a delay, and never completes a key upload or a resume.
#ifndef VEIL_TESTS_MOBILE_CLIENT_EVICTING_PROXY_H_
#define VEIL_TESTS_MOBILE_CLIENT_EVICTING_PROXY_H_

#include <capnp/ez-rpc.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "rpc/status.h"

namespace veil::testing {

// `Interface`: rpc::LwePackServer or rpc::BagServer. Construct it on the thread that serves it
// (testing::StandInServer's `make`): its connection to the real server at `address` shares that
// thread's event loop.
template <class Interface>
class EvictingProxy final : public Interface::Server {
 public:
  using AnswerParams = typename Interface::AnswerParams;
  // Copies a query's parameters into the forwarded call.
  using CopyAnswer =
      std::function<void(typename AnswerParams::Reader, typename AnswerParams::Builder)>;

  EvictingProxy(const std::string& address, std::shared_ptr<std::atomic<bool>> armed,
                kj::Duration delay, CopyAnswer copy_answer)
      : rpc_(kj::heap<capnp::EzRpcClient>(address)),
        real_(rpc_->getMain<Interface>()),
        armed_(std::move(armed)),
        delay_(delay),
        copy_answer_(std::move(copy_answer)) {}

 protected:
  using Server = typename Interface::Server;
  kj::Promise<void> hello(typename Server::HelloContext context) override {
    return context.tailCall(real_.helloRequest());
  }
  kj::Promise<void> config(typename Server::ConfigContext context) override {
    return context.tailCall(real_.configRequest());
  }
  kj::Promise<void> uploadGaloisKeys(typename Server::UploadGaloisKeysContext context) override {
    if (armed_->load()) return kj::NEVER_DONE;
    auto request = real_.uploadGaloisKeysRequest();
    request.setOffset(context.getParams().getOffset());
    request.setChunk(context.getParams().getChunk());
    return context.tailCall(kj::mv(request));
  }
  kj::Promise<void> resumeGaloisKeys(typename Server::ResumeGaloisKeysContext context) override {
    if (armed_->load()) return kj::NEVER_DONE;
    auto request = real_.resumeGaloisKeysRequest();
    request.setToken(context.getParams().getToken());
    return context.tailCall(kj::mv(request));
  }
  kj::Promise<void> answer(typename Server::AnswerContext context) override {
    if (!armed_->load()) {
      auto request = real_.answerRequest();
      copy_answer_(context.getParams(), request);
      return context.tailCall(kj::mv(request));
    }
    return rpc_->getIoProvider().getTimer().afterDelay(delay_).then([]() -> kj::Promise<void> {
      return rpc::StatusToException(absl::AbortedError("the session's keys were evicted"));
    });
  }

 private:
  kj::Own<capnp::EzRpcClient> rpc_;
  typename Interface::Client real_;
  std::shared_ptr<std::atomic<bool>> armed_;
  kj::Duration delay_;
  CopyAnswer copy_answer_;
};

}  // namespace veil::testing

#endif  // VEIL_TESTS_MOBILE_CLIENT_EVICTING_PROXY_H_
