package gossip_test

import (
	"fmt"

	"github.com/chime-scheduler/chime/ring/gossip"
)

func ExampleEncodeMeta() {
	b, err := gossip.EncodeMeta(gossip.Meta{HTTPAddr: "127.0.0.1:7070", BootID: 42, State: gossip.StateActive, Proto: 1})
	if err != nil {
		panic(err)
	}
	m, err := gossip.DecodeMeta(b)
	fmt.Println(len(b), "bytes, version", b[0])
	fmt.Println(m.HTTPAddr, m.BootID, m.State, m.Proto, err)
	// Output:
	// 38 bytes, version 1
	// 127.0.0.1:7070 42 active 1 <nil>
}
