// Package runtime is seqby's run-time side: the types generated code
// implements and returns (Message, Partitioned, Registration), the partition
// key rules, and the engine that consumes partitioned Redis streams one
// owner per key.
package runtime
