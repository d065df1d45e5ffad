// Package hubwire holds what a pool and its NATS server, run as a program
// of its own, say to each other over the program's standard input and
// output (package cluster's StartHub and package hub's Serve): one JSON
// object a line. The pool writes a [Start], the program answers with a
// [Started]; then the pool writes an [Ask] at a time, and the program
// answers each with an [Answer]. At the end of its input the program
// stops the server and exits.
package hubwire

// Env is the environment variable, set to "1", that tells a program that
// it was started as a pool's server: a test binary plays one when it
// finds it.
const Env = "POOLRUN_HUB_PIPE"

// Version is the version of this exchange; a program of another refuses
// to serve.
const Version = 1

// Start asks the program to listen on Addr, with the TLS files CertFile
// and KeyFile where they are not "".
type Start struct {
	Version  int    `json:"version"`
	Addr     string `json:"addr"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// Started is what the server listens on, or Error, why it does not.
type Started struct {
	URL   string `json:"url,omitempty"`
	Token string `json:"token,omitempty"`
	CA    string `json:"ca,omitempty"`
	Error string `json:"error,omitempty"`
}

// What an [Ask] asks.
const (
	AskClients = "clients" // the names of the clients connected now
	AskWritten = "written" // wait until the server has written what it holds
)

// Ask is a question: What, and for AskWritten the longest wait, in
// nanoseconds.
type Ask struct {
	What   string `json:"what"`
	Within int64  `json:"within,omitempty"`
}

// Answer answers an [Ask]: the clients' names, or Error.
type Answer struct {
	Clients []string `json:"clients,omitempty"`
	Error   string   `json:"error,omitempty"`
}
