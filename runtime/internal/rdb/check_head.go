package rdb

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// CheckHead runs ResolveHead's checks on the head r describes (raw is the
// record as read) without acting: nil when ResolveHead would act now, a
// *ResolveError when it would refuse. It writes nothing: an operator's dry
// run.
func CheckHead(ctx context.Context, c redis.UniversalClient, handler string, r HaltRecord, raw string) error {
	reply, err := scriptCheckHead.Run(ctx, c, []string{r.RecordKey(), r.Stream, r.LeaseKey}, raw, r.Token, handler, r.EntryID).StringSlice()
	if err != nil {
		return fmt.Errorf("check the head %s of %s: %w", r.EntryID, r.Partition, err)
	}
	_, err = headReply(reply)
	return err
}
