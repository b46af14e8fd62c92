// Package alertmailtest is a minimal SMTP server for tests of alert
// e-mail: it accepts every command and hands each session's transcript
// over before it answers QUIT, so a sender that has returned has been
// seen.
package alertmailtest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
)

// Server starts an SMTP server on a loopback port, closed when the test
// ends, and returns its address and the channel that receives each
// session's transcript (the commands and the message, CRLF line ends).
func Server(tb testing.TB) (addr string, mails <-chan string) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	out := make(chan string, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c, out)
		}
	}()
	return ln.Addr().String(), out
}

func serve(c net.Conn, out chan<- string) {
	defer c.Close()
	var transcript strings.Builder
	r := bufio.NewReader(c)
	fmt.Fprint(c, "220 alertmailtest\r\n")
	data := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		transcript.WriteString(line)
		switch {
		case data:
			if line == ".\r\n" {
				data = false
				fmt.Fprint(c, "250 ok\r\n")
			}
		case strings.HasPrefix(line, "EHLO"):
			fmt.Fprint(c, "250 alertmailtest\r\n")
		case strings.HasPrefix(line, "DATA"):
			data = true
			fmt.Fprint(c, "354 go\r\n")
		case strings.HasPrefix(line, "QUIT"):
			out <- transcript.String()
			fmt.Fprint(c, "221 bye\r\n")
			return
		default:
			fmt.Fprint(c, "250 ok\r\n")
		}
	}
}
