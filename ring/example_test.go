package ring_test

import (
	"fmt"

	"github.com/chime-scheduler/chime/ring"
)

func ExampleAssign() {
	members := []ring.Member{
		{Name: "n3", HTTPAddr: "127.0.0.1:8003"},
		{Name: "n1", HTTPAddr: "127.0.0.1:8001"},
		{Name: "n2", HTTPAddr: "127.0.0.1:8002"},
	}
	// 16 slots over 3 members: each owns 5 or 6 (plain HRW would give n1
	// 8 of them and n2 3; the moved slots are followed by their HRW owner).
	tab := ring.Assign(members, 16)
	fmt.Print(tab)

	owner, _ := tab.Owner(5)
	follower, _ := tab.Follower(5)
	fmt.Printf("slot 5: owner %s at %s, follower %s\n", owner.Name, owner.HTTPAddr, follower.Name)
	fmt.Printf("n2: %+v\n", tab.Counts()["n2"])
	// Output:
	// n1 owns 1-3,5,10 follows 0,7,11,13,15
	// n2 owns 0,4,7,11-12 follows 1-2,6,8-9,14
	// n3 owns 6,8-9,13-15 follows 3-5,10,12
	// slot 5: owner n1 at 127.0.0.1:8001, follower n3
	// n2: {Owned:5 Following:6}
}

func ExampleTable_Ranges() {
	tab := ring.Assign([]ring.Member{{Name: "a"}, {Name: "b"}}, 8)
	owned, following := tab.Ranges("a")
	fmt.Println("owned:", owned, "following:", following)
	// Output:
	// owned: [1 3-4 7] following: [0 2 5-6]
}
