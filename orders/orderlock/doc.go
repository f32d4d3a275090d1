// Package orderlock takes the per-order locks of the close path and the
// payment side ({prefix}order:close:{orderNo}, Locker.KeyFor) in bulk.
//
// A Locker sets each key with one pipelined SET NX PX per node and releases
// it with redsync's compare-and-delete script, so its leases and redsync
// mutexes on the same keys exclude each other both ways. It works with a
// single Redis, Sentinel or a Cluster (only single-key commands), or as
// Redlock over several independent nodes: a key is held when a majority set
// it within the validity window; held elsewhere when a quorum answered and a
// node says it is taken; Redis unreachable (Lease.Failed) when no quorum
// answered. What a caller does with an unreachable Redis is its own rule
// (the close path's is in package orders).
package orderlock
