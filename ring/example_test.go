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
	tab := ring.Assign(members, 16)
	fmt.Print(tab)

	owner, _ := tab.Owner(5)
	follower, _ := tab.Follower(5)
	fmt.Printf("slot 5: owner %s at %s, follower %s\n", owner.Name, owner.HTTPAddr, follower.Name)
	fmt.Printf("n2: %+v\n", tab.Counts()["n2"])
	// Output:
	// n1 owns 0-3,5,10-11,15 follows 7,13
	// n2 owns 4,7,12 follows 0-2,6,8-9,11,14
	// n3 owns 6,8-9,13-14 follows 3-5,10,12,15
	// slot 5: owner n1 at 127.0.0.1:8001, follower n3
	// n2: {Owned:3 Following:8}
}

func ExampleTable_Ranges() {
	tab := ring.Assign([]ring.Member{{Name: "a"}, {Name: "b"}}, 8)
	owned, following := tab.Ranges("a")
	fmt.Println("owned:", owned, "following:", following)
	// Output:
	// owned: [0-1 3-4 7] following: [2 5-6]
}
