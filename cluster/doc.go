// Package cluster runs the presence engine on Redis Cluster: conformance
// targets for every adapter on a cluster, and the tests that hold the
// engine to the same semantics there as on one server.
package cluster
