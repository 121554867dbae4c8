package goredis_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	goredisadapter "github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer client.Close()

	store := goredisadapter.New(client)
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
