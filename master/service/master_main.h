// `kvd --role master`: the cluster master's main (entry/kvd_main.cc calls it
// with the arguments less --role).
#ifndef NANOKV_MASTER_SERVICE_MASTER_MAIN_H_
#define NANOKV_MASTER_SERVICE_MASTER_MAIN_H_

namespace nanokv::master {

int MasterMain(int argc, char** argv);

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_MASTER_MAIN_H_
