package regfile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/poolrun/poolrun/internal/regfile"
)

// A reader reads a file the user named with its own limit, and tells the
// user what is wrong with a file that is refused.
func Example() {
	dir, err := os.MkdirTemp("", "regfile-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(path, []byte("jobs: []\n"), 0o644); err != nil {
		panic(err)
	}

	data, err := regfile.ReadFile(path, 1<<20)
	fmt.Printf("%q %v\n", data, err)

	_, err = regfile.ReadFile(path, 4)
	var big *regfile.TooLargeError
	if errors.As(err, &big) {
		fmt.Printf("%d bytes, the limit is %d\n", big.Size, big.Limit)
	}

	_, err = regfile.ReadFile("/", 1<<20)
	fmt.Println(err, errors.Is(err, regfile.ErrNotRegular))
	// Output:
	// "jobs: []\n" <nil>
	// 9 bytes, the limit is 4
	// /: is a directory, not a regular file true
}
