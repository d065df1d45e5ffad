//go:build linux

package spawn

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// SignalSession sends sig to every process of session sid (a process
// started with SysProcAttr.Setsid leads the session whose id is its pid,
// and its children and theirs stay in it unless they make sessions of
// their own), found in /proc, and returns how many it signalled. A session
// id cannot be reused while any process is in it, so the processes found
// are the session's even after its leader has died and been reaped.
func SignalSession(sid int, sig syscall.Signal) int {
	if sid <= 1 {
		return 0
	}
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if s, ok := sessionOf(pid); ok && s == sid {
			if syscall.Kill(pid, sig) == nil {
				n++
			}
		}
	}
	return n
}

// sessionOf reads the session id of pid from /proc/pid/stat, whose fields
// after the command name (in parentheses, which may hold anything) are:
// state, ppid, pgrp, session. A zombie has no session worth signalling.
func sessionOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || string(f[0]) == "Z" {
		return 0, false
	}
	s, err := strconv.Atoi(string(f[3]))
	return s, err == nil
}
