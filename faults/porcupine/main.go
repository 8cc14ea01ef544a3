// etcdlock-porcupine checks one scenario's history of lock operations with
// porcupine (github.com/anishathalye/porcupine), an outside linearizability
// checker, against the model of a fenced lock with a register it guards.
//
//	etcdlock-porcupine [-timeout 60s] [-html out.html] history.jsonl
//
// Prints one JSON line ({"result": "ok"|"illegal"|"unknown", ...}); exits 0
// when linearizable, 1 when not (the visualization is written to -html), 2
// when porcupine timed out, 3 on bad input.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Record is one operation of the history file (one JSON line).
type Record struct {
	Lock   string `json:"lock"`
	Client string `json:"client"`
	// acquire | read | write | held | release
	Op    string `json:"op"`
	Call  int64  `json:"call"`
	Ret   *int64 `json:"ret"` // null: the outcome is unknown (open-ended)
	Token int64  `json:"token"`
	Value int64  `json:"value"`
	// ok | refused | unknown
	Result string `json:"result"`
}

// Input of an operation (the output is the Record's Result and Value).
type Input struct {
	Op     string
	Token  int64
	Value  int64
	Result string
}

// State of one lock: etcd's linearizable view.
type State struct {
	Holder int64 // token of the key that holds the lock; 0: free
	Max    int64 // highest token ever granted
	Reg    int64 // the guarded register (the lock's resource key); 0: absent
}

// step is the specification. Every operation names the token of the hold it
// belongs to. A hold ends in etcd's view at an unknown time after its local
// end (unlock, loss, kill): "release" is always open-ended, and its "held"
// says the hold was still etcd's at the moment it ended locally.
func step(s State, in Input) []State {
	switch in.Op {
	case "acquire": // granted only when free, with a token above every earlier one
		if s.Holder == 0 && in.Token > s.Max {
			return []State{{Holder: in.Token, Max: in.Token, Reg: s.Reg}}
		}
	case "held": // the holder's local hold had not outlived etcd's
		if s.Holder == in.Token {
			return []State{s}
		}
	case "release": // the key is gone (delete or lease expiry); a no-op if gone already
		if s.Holder == in.Token {
			return []State{{Holder: 0, Max: s.Max, Reg: s.Reg}}
		}
		return []State{s}
	case "write": // guarded put: etcd compares the holder's key
		w := State{Holder: s.Holder, Max: s.Max, Reg: in.Value}
		switch in.Result {
		case "ok":
			if s.Holder == in.Token {
				return []State{w}
			}
		case "refused":
			if s.Holder != in.Token {
				return []State{s}
			}
		default: // unknown: applied or not, but applied only for the holder
			if s.Holder == in.Token {
				return []State{s, w}
			}
			return []State{s}
		}
	case "read": // guarded get: only the holder, and it sees the last accepted write
		switch in.Result {
		case "ok":
			if s.Holder == in.Token && s.Reg == in.Value {
				return []State{s}
			}
		case "refused":
			if s.Holder != in.Token {
				return []State{s}
			}
		default:
			return []State{s}
		}
	}
	return nil
}

var model = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var names []string
		for _, op := range h {
			l := op.Metadata.(meta).Lock
			if _, ok := by[l]; !ok {
				names = append(names, l)
			}
			by[l] = append(by[l], op)
		}
		sort.Strings(names)
		out := make([][]porcupine.Operation, 0, len(names))
		for _, n := range names {
			out = append(out, by[n])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{State{}} },
	Step: func(state, input, _ interface{}) []interface{} {
		var out []interface{}
		for _, s := range step(state.(State), input.(Input)) {
			out = append(out, s)
		}
		return out
	},
	Equal: func(a, b interface{}) bool { return a.(State) == b.(State) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(Input)
		switch in.Op {
		case "write", "read":
			return fmt.Sprintf("%s(token %d) = %d %s", in.Op, in.Token, in.Value, in.Result)
		case "release":
			return fmt.Sprintf("release(token %d), open-ended", in.Token)
		}
		return fmt.Sprintf("%s(token %d)", in.Op, in.Token)
	},
	DescribeState: func(state interface{}) string {
		s := state.(State)
		return fmt.Sprintf("holder %d, max token %d, register %d", s.Holder, s.Max, s.Reg)
	},
	DescribeOperationMetadata: func(m interface{}) string {
		x := m.(meta)
		return fmt.Sprintf("%s on %s", x.Client, x.Lock)
	},
}

type meta struct{ Lock, Client string }

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "porcupine's time limit")
	html := flag.String("html", "", "where to write the visualization of a violation")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: etcdlock-porcupine [-timeout 60s] [-html out.html] history.jsonl")
		os.Exit(3)
	}
	ops, locks, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model.ToModel(), ops, *timeout)
	took := time.Since(start)
	report := map[string]interface{}{"ops": len(ops), "locks": locks, "ms": took.Milliseconds()}
	code := 0
	switch res {
	case porcupine.Ok:
		report["result"] = "ok"
	case porcupine.Illegal:
		report["result"] = "illegal"
		code = 1
		if *html != "" {
			if err := porcupine.VisualizePath(model.ToModel(), info, *html); err != nil {
				report["html_error"] = err.Error()
			} else {
				report["html"] = *html
			}
		}
	default:
		report["result"] = "unknown"
		code = 2
	}
	line, _ := json.Marshal(report)
	fmt.Println(string(line))
	os.Exit(code)
}

func load(path string) ([]porcupine.Operation, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	clients := map[string]int{}
	locks := map[string]bool{}
	var ops []porcupine.Operation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		ret := int64(math.MaxInt64)
		if r.Ret != nil {
			ret = *r.Ret
		}
		if ret < r.Call {
			return nil, 0, fmt.Errorf("%s:%d: returns before its call", path, n)
		}
		// One visualization row per client and lock.
		key := r.Client + "\x00" + r.Lock
		id, ok := clients[key]
		if !ok {
			id = len(clients)
			clients[key] = id
		}
		locks[r.Lock] = true
		ops = append(ops, porcupine.Operation{
			ClientId: id,
			Input:    Input{Op: r.Op, Token: r.Token, Value: r.Value, Result: r.Result},
			Call:     r.Call,
			Output:   nil,
			Return:   ret,
			Metadata: meta{Lock: r.Lock, Client: r.Client},
		})
	}
	return ops, len(locks), sc.Err()
}
