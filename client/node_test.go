package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node"
)

// signingKey is the callback signing key of the shared test node.
var signingKey = []byte("example-signing-key-0123456789")

// nodeAddr is the HTTP address of the shared test node, a real standalone
// node with an in-memory store that the tests and the examples use (each
// with ids of its own).
var nodeAddr string

func TestMain(m *testing.M) {
	addr, stop, err := startNode("sdk-test", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test node:", err)
		os.Exit(1)
	}
	nodeAddr = addr
	code := m.Run()
	stop()
	os.Exit(code)
}

// startNode starts a standalone in-memory node named name, serving on a
// loopback port that is also its --http-addr (so the slot map names a
// reachable address), and returns that address and a stop func.
func startNode(name string, mutate func(*node.Config)) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	cfg := node.DefaultConfig()
	cfg.Name = name
	cfg.InMemory = true
	cfg.HTTPAddr = ln.Addr().String()
	cfg.Dispatch.SigningKey = signingKey
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := node.New(cfg)
	if err != nil {
		ln.Close()
		return "", nil, err
	}
	if err := n.Start(); err != nil {
		ln.Close()
		return "", nil, err
	}
	srv := httptest.NewUnstartedServer(n.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
		srv.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); !n.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("node %s not ready after 10 s", name)
		}
	}
	return cfg.HTTPAddr, stop, nil
}

// startTestNode is startNode for one test.
func startTestNode(t *testing.T, mutate func(*node.Config)) string {
	t.Helper()
	addr, stop, err := startNode(t.Name(), mutate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}
