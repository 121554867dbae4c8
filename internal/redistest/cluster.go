package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterTimeout bounds redis-cli --cluster create and the wait for every
// node to report a healthy cluster.
const clusterTimeout = 30 * time.Second

// ClusterInstance is a Redis Cluster of redis-server processes on 127.0.0.1,
// with all 16384 slots spread over its masters.
type ClusterInstance struct {
	masters  []*Instance
	replicas []*Instance
}

// Cluster starts a Redis Cluster of masters nodes (at least 3, as redis-cli
// requires) without replicas and waits until every node reports
// cluster_state:ok. It skips the test where redis-server or redis-cli is not
// installed (see Server for where they are looked up), and stops every node
// when the test ends.
func Cluster(tb testing.TB, masters int) *ClusterInstance {
	tb.Helper()
	return ClusterWithReplicas(tb, masters, 0)
}

// ClusterWithReplicas starts a Redis Cluster of masters nodes (at least 3),
// each with replicasPerMaster replicas, and waits until every node reports
// cluster_state:ok, every replica's link to its master is up and every master
// counts its replicas online. It skips the test where redis-server or
// redis-cli is not installed (see Server for where they are looked up), and
// stops every node when the test ends.
func ClusterWithReplicas(tb testing.TB, masters, replicasPerMaster int) *ClusterInstance {
	tb.Helper()
	if masters < 3 || replicasPerMaster < 0 {
		tb.Fatalf("redistest: a cluster needs at least 3 masters and no negative replica count, got %d masters, %d replicas each", masters, replicasPerMaster)
	}
	server := lookPath(tb, "redis-server", "redis-server not installed; skipping real-server test")
	cli := lookPath(tb, "redis-cli", "redis-cli not installed; skipping real-cluster test")

	args := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000",
	}
	n := masters * (1 + replicasPerMaster)
	nodes := make([]*Instance, n)
	for k := range nodes {
		nodes[k] = launch(tb, server, args, true)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	create := []string{"--cluster", "create"}
	for _, node := range nodes {
		create = append(create, node.Addr)
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, create...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redistest: redis-cli %v: %v\n%s\n%s", create, err, out, logs(nodes))
	}

	c := &ClusterInstance{}
	deadline := time.Now().Add(clusterTimeout)
	for _, node := range nodes {
		if err := waitClusterNode(node, n, replicasPerMaster, deadline); err != nil {
			tb.Fatalf("redistest: %v\nredis-cli output:\n%s\n%s", err, out, logs(nodes))
		}
		role, err := node.Do("ROLE")
		items, _ := role.([]any)
		if err != nil || len(items) == 0 {
			tb.Fatalf("redistest: ROLE on %s: %v %v", node.Addr, role, err)
		}
		if items[0] == "master" {
			c.masters = append(c.masters, node)
		} else {
			c.replicas = append(c.replicas, node)
		}
	}
	if len(c.masters) != masters {
		tb.Fatalf("redistest: want %d masters, cluster has %d\nredis-cli output:\n%s", masters, len(c.masters), out)
	}
	return c
}

// waitClusterNode waits until node sees a healthy cluster of n nodes with
// every slot assigned and, if it is a replica, an up link to its master, or,
// if it is a master, replicasPerMaster replicas online.
func waitClusterNode(node *Instance, n, replicasPerMaster int, deadline time.Time) error {
	var last string
	for {
		if reply, err := node.Do("CLUSTER", "INFO"); err == nil {
			info, _ := reply.(string)
			last = info
			if infoField(info, "cluster_state") == "ok" &&
				infoField(info, "cluster_slots_assigned") == "16384" &&
				infoField(info, "cluster_known_nodes") == strconv.Itoa(n) {
				repl, err := node.Do("INFO", "replication")
				text, _ := repl.(string)
				inbound, lerr := inboundLinks(node)
				switch {
				case err != nil || (infoField(text, "role") != "master" && infoField(text, "master_link_status") != "up"):
					last = text
				case lerr != nil:
					last = lerr.Error()
				case inbound < n-1:
					last = fmt.Sprintf("%d of %d inbound cluster bus links identified", inbound, n-1)
				case infoField(text, "role") == "master" && onlineReplicas(text) < replicasPerMaster:
					// the replica's link may be up before its master counts it
					// as online (the initial sync still under way): a test that
					// picks a master with a live replica must find one
					last = text
				default:
					return nil
				}
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not ready within %v; last reply:\n%s", node.Addr, clusterTimeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inboundLinks counts the cluster bus links from other nodes that node has
// tied to their sender (CLUSTER LINKS, direction "from"). Until it has, a
// Valkey 8.0 node closes a link whose first message is a light-header
// PUBLISH, and the message is lost (valkey-io/valkey#2817): a cluster is
// ready for pub/sub only once every node has one from every other.
func inboundLinks(node *Instance) (int, error) {
	reply, err := node.Do("CLUSTER", "LINKS")
	if err != nil {
		return 0, err
	}
	links, _ := reply.([]any)
	inbound := 0
	for _, l := range links {
		fields, _ := l.([]any)
		for k := 0; k+1 < len(fields); k += 2 {
			if fields[k] == "direction" && fields[k+1] == "from" {
				inbound++
			}
		}
	}
	return inbound, nil
}

func logs(nodes []*Instance) string {
	var s string
	for _, node := range nodes {
		s += fmt.Sprintf("--- log of %s ---\n%s\n", node.Addr, node.Log())
	}
	return s
}

// Addrs returns the "127.0.0.1:PORT" address of every node, masters first.
func (c *ClusterInstance) Addrs() []string {
	var addrs []string
	for _, node := range c.Nodes() {
		addrs = append(addrs, node.Addr)
	}
	return addrs
}

// Nodes returns every node, masters first.
func (c *ClusterInstance) Nodes() []*Instance {
	return append(append([]*Instance(nil), c.masters...), c.replicas...)
}

// Masters returns the nodes that were masters when the cluster came up.
func (c *ClusterInstance) Masters() []*Instance { return append([]*Instance(nil), c.masters...) }

// Replicas returns the nodes that were replicas when the cluster came up.
func (c *ClusterInstance) Replicas() []*Instance { return append([]*Instance(nil), c.replicas...) }

// MasterFor returns the master that serves key's hash slot, as the cluster
// itself reports it (CLUSTER KEYSLOT, CLUSTER SLOTS).
func (c *ClusterInstance) MasterFor(key string) (*Instance, error) {
	reply, err := c.masters[0].Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		return nil, err
	}
	slot, _ := reply.(int64)
	reply, err = c.masters[0].Do("CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	ranges, _ := reply.([]any)
	for _, r := range ranges {
		rr, _ := r.([]any)
		if len(rr) < 3 {
			continue
		}
		lo, _ := rr[0].(int64)
		hi, _ := rr[1].(int64)
		master, _ := rr[2].([]any)
		if slot < lo || slot > hi || len(master) < 2 {
			continue
		}
		port, _ := master[1].(int64)
		for _, node := range c.Nodes() {
			if int64(node.Port) == port {
				return node, nil
			}
		}
	}
	return nil, fmt.Errorf("redistest: no node serves slot %d of %q", slot, key)
}

// Stop stops every node; the test's cleanup does so too.
func (c *ClusterInstance) Stop() {
	for _, node := range c.Nodes() {
		node.Stop()
	}
}

// onlineReplicas counts the replicas a master's INFO replication lists as
// online ("slave0:ip=…,port=…,state=online,…").
func onlineReplicas(info string) int {
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ",state=online,") {
			n++
		}
	}
	return n
}
