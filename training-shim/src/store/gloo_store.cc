#include "store/gloo_store.h"

#include <gloo/common/error.h>

namespace star::shim {
namespace {

class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<star::shim::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Throw(store_->Set(key, Bytes(data.begin(), data.end())));
  }

  std::vector<char> get(const std::string& key) override {
    auto value = store_->Get(key, timeout_);
    Throw(value.status());
    return std::vector<char>(value->begin(), value->end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Throw(store_->Wait(keys, timeout));
  }

 private:
  static void Throw(const Status& status) {
    if (!status.ok()) throw gloo::IoException(status.ToString());
  }

  std::shared_ptr<star::shim::Store> store_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<gloo::rendezvous::Store> NewGlooStore(std::shared_ptr<Store> store,
                                                      std::chrono::milliseconds timeout) {
  return std::make_unique<GlooStore>(std::move(store), timeout);
}

}  // namespace star::shim
