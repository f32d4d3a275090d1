// Package coupon gives a close's coupons back: it locks the coupons of the
// orders being closed, judges each order's coupon from the locked rows
// (Validate) and sets them back to unused (GiveBack), running the
// statements of closesql.Coupon that package orders passes in. Package
// orders decides which orders close and what an order set aside becomes;
// this one never imports it.
//
// A coupon is found by id, or by matching columns (the used rows matching
// an order). With closesql.Coupon.AnyCopy the rows matching an order are
// copies of one coupon (macrozheng/mall's coupon history): the close gives
// back one of them, and the orders matching the same copies, closing
// together, get distinct ones. The copies are locked where the close locks
// coupons (after the stock) and the choice is made under that lock, so two
// closes of one key, in one transaction or in several, never give back the
// same copy twice: the later one finds it unused.
package coupon
