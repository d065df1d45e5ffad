package human_test

import (
	"fmt"
	"time"

	"github.com/poolrun/poolrun/internal/human"
)

func Example() {
	fmt.Println(human.Bytes(512), human.Bytes(40_000_000), human.RSS(0))
	fmt.Println(human.Duration(1234567*time.Microsecond), human.Duration(12345*time.Millisecond))
	fmt.Println(human.MiBSeconds(1.5*(1<<20)), human.Count(2.5), human.Count(3))
	fmt.Printf("%d job%s, %d job%s\n", 1, human.Plural(1), 4, human.Plural(4))
	fmt.Println(human.Clip("naïve", 3))
	// Output:
	// 512 B 38.1 MiB -
	// 1.23s 12.3s
	// 1.50 2.5 3
	// 1 job, 4 jobs
	// na…
}
