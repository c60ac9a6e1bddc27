// The pause stand-in (registry.k8s.io/pause): the process a pod sandbox keeps its namespaces
// alive with. It waits for SIGINT or SIGTERM and exits 0. As PID 1 of a pod that shares its
// process namespace it is also the pod's init, so it reaps every child that exits (SIGCHLD).
// -v prints the version, as upstream's does. Written here; upstream's is C (build/pause/linux).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Set by the build (-ldflags "-X main.version=v3.10.1").
var version = "unknown"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Printf("pause.go %s\n", version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", s)
			os.Exit(0)
		}
		// Several children may have ended for one SIGCHLD: reap until none is left.
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
