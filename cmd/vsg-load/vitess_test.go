package main

import (
	"testing"
)

func TestCountDumpThreads(t *testing.T) {
	out := []byte(`{"fields":[{"name":"Id","type":265},{"name":"User"},{"name":"Host"},{"name":"db"},{"name":"Command"},{"name":"Time"}],
	"rows":[[16,"vt_dba","localhost","vt_customer","Sleep",158],
	        [17,"vt_filtered","localhost",null,"Binlog Dump",12],
	        [18,"vt_filtered","localhost",null,"Binlog Dump GTID",3],
	        [19,"vt_app","localhost","vt_customer","Query",0]]}`)
	n, err := countDumpThreads(out)
	if err != nil || n != 2 {
		t.Fatalf("n %d err %v", n, err)
	}
	if _, err := countDumpThreads([]byte(`{"fields":[{"name":"Id"}],"rows":[]}`)); err == nil {
		t.Fatal("no Command column accepted")
	}
}

func TestParseTablets(t *testing.T) {
	ts := parseTablets("zone1-0000000100 commerce 0 primary localhost:15100 localhost:17100 [] 2026-12-03T09:11:37Z\n" +
		"zone1-0000000300 customer -80 primary localhost:15300 localhost:17300 [] 2026-12-03T09:11:38Z\n")
	if len(ts) != 2 || ts[1].Alias != "zone1-0000000300" || ts[1].Shard != "-80" || ts[1].Keyspace != "customer" || ts[1].Web != "localhost:15300" {
		t.Fatalf("%+v", ts)
	}
}

func TestParseStatCPU(t *testing.T) {
	// The command name may contain spaces and parentheses.
	stat := "1234 (vstream (gw) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 9 0 100 0 0"
	c, err := parseStatCPU(stat)
	if err != nil || c < 2.869 || c > 2.871 {
		t.Fatalf("cpu %v err %v", c, err)
	}
}
