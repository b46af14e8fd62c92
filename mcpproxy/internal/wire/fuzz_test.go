package wire_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// FuzzEventStream feeds arbitrary bytes to the reader of an upstream's
// event stream and to the reading of the messages it yields: no panic, no
// data larger than the input, and a result only for the call's own id.
func FuzzEventStream(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"idn-1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"idn-1\",\"progress\":1}}\r\n\r\n: comment\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"idn-1\",\r\ndata: \"error\":{\"code\":-32602,\"message\":\"bad\"}}\r\n\r\n"))
	f.Add([]byte("id: 7\nretry: 10\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\ndata: {\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse\"}}\n\n"))
	f.Add([]byte("data:\n\ndata: x\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		events := wire.NewEventReader(bufio.NewReaderSize(bytes.NewReader(stream), 16))
		for {
			data, err := events.Next()
			if err != nil {
				return
			}
			if len(data) == 0 || len(data) > len(stream) {
				t.Fatalf("event data of %d bytes from a stream of %d", len(data), len(stream))
			}
			var msg wire.Incoming
			if json.Unmarshal(data, &msg) != nil {
				continue
			}
			res, err := wire.CallResult(msg, "idn-1")
			if res != nil && (err != nil || string(msg.ID) == "" || msg.Error != nil) {
				t.Fatalf("result %+v, %v for message %s", res, err, data)
			}
			if res != nil {
				if key, _ := wire.IDKey(msg.ID); key != strconv.Quote("idn-1") {
					t.Fatalf("a result for id %s taken as the call's", msg.ID)
				}
			}
		}
	})
}

// FuzzClassify feeds arbitrary bodies to the endpoint's choice of what it
// answers itself: no panic, and only well-formed calls and cancellations
// with a usable id are taken.
func FuzzClassify(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a.echo","arguments":{"text":"hi"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","_meta":{"progressToken":1}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","_meta":{"claudecode/toolUseId":"t1"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{},"task":{"ttl":60000}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","task":null}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x","reason":"stop"}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}]`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"a"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"Method":"tools/call","method":"tools/list","params":{"NAME":"a","name":"b"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, ok := wire.Classify(body)
		if !ok {
			return
		}
		if m.Key == "" {
			t.Fatalf("taken without an id: %s", body)
		}
		if m.Call != nil {
			var probe struct {
				Params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &probe)
			if _, token := probe.Params.Meta["progressToken"]; m.Call.Name == "" || token && m.Call.Task == nil {
				t.Fatalf("call taken with name %q: %s", m.Call.Name, body)
			}
			if key, ok := wire.IDKey(m.ID); !ok || key != m.Key {
				t.Fatalf("call id %s keyed %q", m.ID, m.Key)
			}
		}
	})
}
