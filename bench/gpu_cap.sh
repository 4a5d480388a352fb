# Sourced by the GPU scripts (bash): run a command under a memory cap on a machine without Docker.
cap() {  # run "$@" in a fresh child cgroup v2 with memory.max = $1 (no swap); print peak and OOM kills
  local name=rapidship-$RANDOM limit=$1; shift
  mkdir /sys/fs/cgroup/$name && echo "$limit" > /sys/fs/cgroup/$name/memory.max && echo 0 > /sys/fs/cgroup/$name/memory.swap.max
  ( echo $BASHPID > /sys/fs/cgroup/$name/cgroup.procs; "$@" )
  local rc=$?
  echo "cgroup $name: memory.max $limit, peak $(cat /sys/fs/cgroup/$name/memory.peak), $(grep oom_kill /sys/fs/cgroup/$name/memory.events | tr '\n' ' ')"
  rmdir /sys/fs/cgroup/$name 2>/dev/null
  return $rc
}
