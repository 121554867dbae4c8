package redigo_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	redigoadapter "github.com/presencekit/presence/adapters/redigo"
	"github.com/presencekit/presence/core"
)

func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	pool := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", m.Addr())
		},
		MaxIdle: 2,
	}
	defer pool.Close()

	store := redigoadapter.New(pool)
	results := store.Eval(context.Background(), []core.Call{
		{Source: "return redis.call('INCR', KEYS[1])", Keys: []string{"{u1}:n"}},
		{SHA: "0000000000000000000000000000000000000000"},
		{Source: "return {KEYS[1], ARGV[1]}", Keys: []string{"{u1}:n"}, Args: []string{"x"}},
	})
	for _, r := range results {
		fmt.Println(r.Value, errors.Is(r.Err, core.ErrNoScript))
	}
	// Output:
	// 1 false
	// nil true
	// ["{u1}:n" "x"] false
}
