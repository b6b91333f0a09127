package demo

import (
	"errors"
	"os"
	"testing"
)

// A RedisServer answers once started, not once killed, and again on the
// same port once started again; Close is idempotent.
func TestRedisServer(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	srv, err := StartRedis()
	if errors.Is(err, ErrNoRedis) {
		if os.Getenv("REDISSTORE_REQUIRED") != "" {
			t.Fatal("redis-server is not on PATH and REDISSTORE_REQUIRED is set")
		}
		t.Skip("redis-server is not on PATH; install it (Debian: apt-get install redis-server) to run this test")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := ping(srv.Addr()); err != nil {
		t.Fatalf("started: %v", err)
	}
	pid := srv.Pid()
	srv.Kill()
	if err := ping(srv.Addr()); err == nil {
		t.Fatal("killed, still answers")
	}
	if srv.Pid() != 0 {
		t.Errorf("killed: Pid = %d, want 0", srv.Pid())
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("started again: %v", err)
	}
	if err := ping(srv.Addr()); err != nil || srv.Pid() == pid {
		t.Errorf("started again: ping %v, pid %d (was %d)", err, srv.Pid(), pid)
	}
	srv.Close()
	srv.Close()
}

func TestRedisURL(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1/0")
	url, srv, err := Redis()
	if url != "redis://127.0.0.1:1/0" || srv != nil || err != nil {
		t.Errorf("Redis() with REDIS_URL = %q, %v, %v", url, srv, err)
	}
}

func TestRedisOptional(t *testing.T) {
	t.Setenv("REDISSTORE_REQUIRED", "")
	if RedisOptional(false) || !RedisOptional(true) {
		t.Error("without REDISSTORE_REQUIRED: only a smoke run may skip")
	}
	t.Setenv("REDISSTORE_REQUIRED", "1")
	if RedisOptional(true) {
		t.Error("with REDISSTORE_REQUIRED: a smoke run may not skip")
	}
}
