// The usage line of kvctl's commands as a person writes it
// (`kvctl limit [OPTIONS] [IPC] TENANT SIZE`), where CLI11 would print its
// positional's name and count (`args(2x)`): CLI11 2.1 has no usage setter,
// so a formatter keeps the lines given and falls back to CLI11's own.
#ifndef NANOKV_KVCTL_USAGE_H_
#define NANOKV_KVCTL_USAGE_H_

#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace nanokv::kvctl {

class UsageFormatter : public CLI::Formatter {
 public:
  // `app`'s usage line: `kvctl <command> [OPTIONS] <arguments>`.
  // `app` must remain live while the formatter is used.
  void Set(const CLI::App* app, std::string arguments) { arguments_[app] = std::move(arguments); }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    auto it = arguments_.find(app);
    if (it == arguments_.end()) return CLI::Formatter::make_usage(app, std::move(name));
    return "Usage: " + name + " [OPTIONS]" + (it->second.empty() ? "" : " " + it->second) + "\n";
  }

 private:
  std::map<const CLI::App*, std::string> arguments_;
};

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_USAGE_H_
