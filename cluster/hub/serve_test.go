package hub_test

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/internal/hubwire"
)

// TestServe: the exchange of hubwire, in order: where the server listens,
// the clients' names (none yet), a wait for the writes, a question of no
// such kind answered with an error, and the end of the input ends Serve
// with nil; a pool of another version of the exchange is refused, with
// both versions said.
func TestServe(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- hub.Serve(inR, outW); outW.Close() }()
	enc, dec := json.NewEncoder(inW), json.NewDecoder(bufio.NewReader(outR))
	var started hubwire.Started
	if err := enc.Encode(hubwire.Start{Version: hubwire.Version}); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&started); err != nil || started.Error != "" || !strings.HasPrefix(started.URL, "nats://127.0.0.1:") || len(started.Token) != 64 {
		t.Fatalf("started %+v, %v: want a loopback URL and a token", started, err)
	}
	for _, c := range []struct {
		ask     hubwire.Ask
		wantErr string
	}{
		{hubwire.Ask{What: hubwire.AskClients}, ""},
		{hubwire.Ask{What: hubwire.AskWritten, Within: 1e9}, ""},
		{hubwire.Ask{What: "everything"}, `no such question "everything"`},
	} {
		var a hubwire.Answer
		if err := enc.Encode(c.ask); err != nil {
			t.Fatal(err)
		}
		if err := dec.Decode(&a); err != nil || len(a.Clients) != 0 || !strings.Contains(a.Error, c.wantErr) || (c.wantErr == "") != (a.Error == "") {
			t.Errorf("%+v: %+v, %v; want no client and the error %q", c.ask, a, err, c.wantErr)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve at the end of its input: %v", err)
	}

	var out strings.Builder
	err := hub.Serve(strings.NewReader(`{"version": 99}`+"\n"), &out)
	if err == nil || !strings.Contains(err.Error(), "version 1") || !strings.Contains(err.Error(), "version 99") || !strings.Contains(out.String(), `"error"`) {
		t.Errorf("another version: %v, said %q; want both versions named, and said", err, out.String())
	}
}
