// kvd's node role: the per-node daemon's main (entry/kvd_main.cc calls it
// with the arguments less --role).
#ifndef NANOKV_DAEMON_NODE_MAIN_H_
#define NANOKV_DAEMON_NODE_MAIN_H_

namespace nanokv::kvd {

int NodeMain(int argc, char** argv);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_MAIN_H_
