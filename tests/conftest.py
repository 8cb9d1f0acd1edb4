import torch as th

# The CI machine has two cores and the tests use tiny networks: one intra-op thread is fastest
# and keeps parallel test workers from fighting over cores.
th.set_num_threads(1)
