package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
)

// echoLen returns the length of its argument and a value of n bytes.
var echoLen = engine.Register("cluster_test.echoLen", func(ctx context.Context, a sized) (sized, error) {
	return sized{Len: len(a.Data), Data: make([]byte, a.Want)}, nil
})

type sized struct {
	Data      []byte
	Len, Want int
}

// TestValueLimitsRemote: an argument and a result of the pool's limit
// (64 MiB by default) cross to and from a remote worker; an argument or a
// result over it fails that job alone, with an error that names the limit
// (ErrTooLarge, for the argument, which the pool checks), and the pool
// goes on. (Not under the race detector, whose shadow memory makes 64 MiB
// values take minutes; .ci/run runs it without.)
func TestValueLimitsRemote(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("64 MiB values: slow under -race and -short")
	}
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := cluster.Listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startWorkers(t, joinFile, 1)
	// The remote worker alone.
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	// The encoding of sized takes some bytes besides Data: leave it 1 KiB.
	const most = engine.DefaultMaxValueSize - 1<<10
	big := engine.Queue(p, echoLen, sized{Data: make([]byte, most), Want: most})
	overArg := engine.Queue(p, echoLen, sized{Data: make([]byte, engine.DefaultMaxValueSize+1)})
	over := engine.Queue(p, echoLen, sized{Want: engine.DefaultMaxValueSize + 1})
	after := engine.Queue(p, echoLen, sized{Data: []byte("abc"), Want: 1})
	err = p.Run(context.Background())
	if !errors.Is(err, engine.ErrTooLarge) {
		t.Errorf("Run: %v, want the error of the job whose result is too large", err)
	}
	if v, err := big.Result(); err != nil || v.Len != most || len(v.Data) != most {
		t.Errorf("the job of a %d-byte argument and result: argument %d bytes, result %d bytes, %v", most, v.Len, len(v.Data), err)
	}
	if _, err := overArg.Result(); !errors.Is(err, engine.ErrTooLarge) {
		t.Errorf("the job whose argument is over the limit: %v, want ErrTooLarge", err)
	}
	limit := fmt.Sprintf("the limit is %d", engine.DefaultMaxValueSize)
	if _, err := over.Result(); over.Status() != engine.Failed || err == nil || !strings.Contains(err.Error(), limit) {
		t.Errorf("the job whose result is over the limit: %v, %v; want Failed, naming the limit", over.Status(), err)
	} else {
		t.Logf("over the limit: %v", err)
	}
	if v, err := after.Result(); err != nil || v.Len != 3 {
		t.Errorf("the job after it: %+v, %v", v, err)
	}
}
