package main

// Two open-source shops' tables as the projects create them (their names,
// types, NOT NULL columns and indexes; columns the close never reads are
// kept where they are NOT NULL without a default, so that the seeds write
// them as the shops do), plus only the indexes `executor migrate` asks a
// DBA to add, each marked "added for the executor".

// mallDDL is macrozheng/mall's order tables (document/sql/mall.sql).
var mallDDL = []string{
	"CREATE TABLE `oms_order` (`id` bigint(20) NOT NULL AUTO_INCREMENT COMMENT '订单id', `member_id` bigint(20) NOT NULL, " +
		"`coupon_id` bigint(20) DEFAULT NULL, `order_sn` varchar(64) DEFAULT NULL COMMENT '订单编号', " +
		"`create_time` datetime DEFAULT NULL COMMENT '提交时间', `member_username` varchar(64) DEFAULT NULL, " +
		"`total_amount` decimal(10,2) DEFAULT NULL, `pay_amount` decimal(10,2) DEFAULT NULL, `freight_amount` decimal(10,2) DEFAULT NULL, " +
		"`promotion_amount` decimal(10,2) DEFAULT NULL, `integration_amount` decimal(10,2) DEFAULT NULL, " +
		"`coupon_amount` decimal(10,2) DEFAULT NULL, `discount_amount` decimal(10,2) DEFAULT NULL, " +
		"`pay_type` int(1) DEFAULT NULL COMMENT '支付方式：0->未支付；1->支付宝；2->微信', `source_type` int(1) DEFAULT NULL, " +
		"`status` int(1) DEFAULT NULL COMMENT '订单状态：0->待付款；1->待发货；2->已发货；3->已完成；4->已关闭；5->无效订单', " +
		"`order_type` int(1) DEFAULT NULL, `delivery_company` varchar(64) DEFAULT NULL, `delivery_sn` varchar(64) DEFAULT NULL, " +
		"`auto_confirm_day` int(11) DEFAULT NULL, `integration` int(11) DEFAULT NULL COMMENT '可以获得的积分', `growth` int(11) DEFAULT NULL, " +
		"`promotion_info` varchar(100) DEFAULT NULL, `bill_type` int(1) DEFAULT NULL, `bill_header` varchar(200) DEFAULT NULL, " +
		"`bill_content` varchar(200) DEFAULT NULL, `bill_receiver_phone` varchar(32) DEFAULT NULL, `bill_receiver_email` varchar(64) DEFAULT NULL, " +
		"`receiver_name` varchar(100) NOT NULL, `receiver_phone` varchar(32) NOT NULL, `receiver_post_code` varchar(32) DEFAULT NULL, " +
		"`receiver_province` varchar(32) DEFAULT NULL, `receiver_city` varchar(32) DEFAULT NULL, `receiver_region` varchar(32) DEFAULT NULL, " +
		"`receiver_detail_address` varchar(200) DEFAULT NULL, `note` varchar(500) DEFAULT NULL, `confirm_status` int(1) DEFAULT NULL, " +
		"`delete_status` int(1) NOT NULL DEFAULT '0' COMMENT '删除状态：0->未删除；1->已删除', " +
		"`use_integration` int(11) DEFAULT NULL COMMENT '下单时使用的积分', `payment_time` datetime DEFAULT NULL, " +
		"`delivery_time` datetime DEFAULT NULL, `receive_time` datetime DEFAULT NULL, `comment_time` datetime DEFAULT NULL, " +
		"`modify_time` datetime DEFAULT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8 COMMENT='订单表'",
	"CREATE TABLE `oms_order_item` (`id` bigint(20) NOT NULL AUTO_INCREMENT, `order_id` bigint(20) DEFAULT NULL COMMENT '订单id', " +
		"`order_sn` varchar(64) DEFAULT NULL, `product_id` bigint(20) DEFAULT NULL, `product_pic` varchar(500) DEFAULT NULL, " +
		"`product_name` varchar(200) DEFAULT NULL, `product_brand` varchar(200) DEFAULT NULL, `product_sn` varchar(64) DEFAULT NULL, " +
		"`product_price` decimal(10,2) DEFAULT NULL, `product_quantity` int(11) DEFAULT NULL COMMENT '购买数量', " +
		"`product_sku_id` bigint(20) DEFAULT NULL COMMENT '商品sku编号', `product_sku_code` varchar(50) DEFAULT NULL, " +
		"`product_category_id` bigint(20) DEFAULT NULL, `promotion_name` varchar(200) DEFAULT NULL, " +
		"`promotion_amount` decimal(10,2) DEFAULT NULL, `coupon_amount` decimal(10,2) DEFAULT NULL, " +
		"`integration_amount` decimal(10,2) DEFAULT NULL, `real_amount` decimal(10,2) DEFAULT NULL, `gift_integration` int(11) DEFAULT '0', " +
		"`gift_growth` int(11) DEFAULT '0', `product_attr` varchar(500) DEFAULT NULL, PRIMARY KEY (`id`)) " +
		"ENGINE=InnoDB DEFAULT CHARSET=utf8 COMMENT='订单中所包含的商品'",
	"CREATE TABLE `pms_sku_stock` (`id` bigint(20) NOT NULL AUTO_INCREMENT, `product_id` bigint(20) DEFAULT NULL, " +
		"`sku_code` varchar(64) NOT NULL COMMENT 'sku编码', `price` decimal(10,2) DEFAULT NULL, `stock` int(11) DEFAULT '0' COMMENT '库存', " +
		"`low_stock` int(11) DEFAULT NULL, `pic` varchar(255) DEFAULT NULL, `sale` int(11) DEFAULT NULL, " +
		"`promotion_price` decimal(10,2) DEFAULT NULL, `lock_stock` int(11) DEFAULT '0' COMMENT '锁定库存', " +
		"`sp_data` varchar(500) DEFAULT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8 COMMENT='sku的库存'",
	"CREATE TABLE `sms_coupon_history` (`id` bigint(20) NOT NULL AUTO_INCREMENT, `coupon_id` bigint(20) DEFAULT NULL, " +
		"`member_id` bigint(20) DEFAULT NULL, `coupon_code` varchar(64) DEFAULT NULL, `member_nickname` varchar(64) DEFAULT NULL, " +
		"`get_type` int(1) DEFAULT NULL, `create_time` datetime DEFAULT NULL, " +
		"`use_status` int(1) DEFAULT NULL COMMENT '使用状态：0->未使用；1->已使用；2->已过期', `use_time` datetime DEFAULT NULL, " +
		"`order_id` bigint(20) DEFAULT NULL, `order_sn` varchar(100) DEFAULT NULL, PRIMARY KEY (`id`), " +
		"KEY `idx_member_id` (`member_id`), KEY `idx_coupon_id` (`coupon_id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8 COMMENT='优惠券使用、领取历史表'",
	"CREATE TABLE `ums_member` (`id` bigint(20) NOT NULL AUTO_INCREMENT, `member_level_id` bigint(20) DEFAULT NULL, " +
		"`username` varchar(64) DEFAULT NULL, `password` varchar(64) DEFAULT NULL, `nickname` varchar(64) DEFAULT NULL, " +
		"`phone` varchar(64) DEFAULT NULL, `status` int(1) DEFAULT NULL, `create_time` datetime DEFAULT NULL, " +
		"`icon` varchar(500) DEFAULT NULL, `gender` int(1) DEFAULT NULL, `birthday` date DEFAULT NULL, `city` varchar(64) DEFAULT NULL, " +
		"`job` varchar(100) DEFAULT NULL, `personalized_signature` varchar(200) DEFAULT NULL, `source_type` int(1) DEFAULT NULL, " +
		"`integration` int(11) DEFAULT NULL COMMENT '积分', `growth` int(11) DEFAULT NULL, `luckey_count` int(11) DEFAULT NULL, " +
		"`history_integration` int(11) DEFAULT NULL, PRIMARY KEY (`id`), UNIQUE KEY `idx_username` (`username`), " +
		"UNIQUE KEY `idx_phone` (`phone`)) ENGINE=InnoDB DEFAULT CHARSET=utf8 COMMENT='会员表'",
	"CREATE TABLE `oms_order_setting` (`id` bigint(20) NOT NULL AUTO_INCREMENT, `flash_order_overtime` int(11) DEFAULT NULL, " +
		"`normal_order_overtime` int(11) DEFAULT NULL COMMENT '正常订单超时时间(分)', `confirm_overtime` int(11) DEFAULT NULL, " +
		"`finish_overtime` int(11) DEFAULT NULL, `comment_overtime` int(11) DEFAULT NULL, PRIMARY KEY (`id`)) " +
		"ENGINE=InnoDB DEFAULT CHARSET=utf8 COMMENT='订单设置表'",
	"INSERT INTO `oms_order_setting` VALUES (1, 60, 120, 15, 7, 7)",
}

// litemallDDL is linlinjava/litemall's order tables (litemall-db/sql/litemall_table.sql).
var litemallDDL = []string{
	"CREATE TABLE `litemall_order` (`id` int(11) NOT NULL AUTO_INCREMENT, `user_id` int(11) NOT NULL COMMENT '用户表的用户ID', " +
		"`order_sn` varchar(63) NOT NULL COMMENT '订单编号', `order_status` smallint(6) NOT NULL COMMENT '订单状态', " +
		"`aftersale_status` smallint(6) DEFAULT '0', `consignee` varchar(63) NOT NULL, `mobile` varchar(63) NOT NULL, " +
		"`address` varchar(127) NOT NULL, `message` varchar(512) NOT NULL DEFAULT '', `goods_price` decimal(10,2) NOT NULL, " +
		"`freight_price` decimal(10,2) NOT NULL, `coupon_price` decimal(10,2) NOT NULL, `integral_price` decimal(10,2) NOT NULL, " +
		"`groupon_price` decimal(10,2) NOT NULL, `order_price` decimal(10,2) NOT NULL, `actual_price` decimal(10,2) NOT NULL, " +
		"`pay_id` varchar(63) DEFAULT NULL, `pay_time` datetime DEFAULT NULL, `ship_sn` varchar(63) DEFAULT NULL, " +
		"`ship_channel` varchar(63) DEFAULT NULL, `ship_time` datetime DEFAULT NULL, `refund_amount` decimal(10,2) DEFAULT NULL, " +
		"`refund_type` varchar(63) DEFAULT NULL, `refund_content` varchar(127) DEFAULT NULL, `refund_time` datetime DEFAULT NULL, " +
		"`confirm_time` datetime DEFAULT NULL, `comments` smallint(6) DEFAULT '0', `end_time` datetime DEFAULT NULL, " +
		"`add_time` datetime DEFAULT NULL, `update_time` datetime DEFAULT NULL, `deleted` tinyint(1) DEFAULT '0' COMMENT '逻辑删除', " +
		"PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='订单表'",
	"CREATE TABLE `litemall_order_goods` (`id` int(11) NOT NULL AUTO_INCREMENT, `order_id` int(11) NOT NULL DEFAULT '0', " +
		"`goods_id` int(11) NOT NULL DEFAULT '0', `goods_name` varchar(127) NOT NULL DEFAULT '', `goods_sn` varchar(63) NOT NULL DEFAULT '', " +
		"`product_id` int(11) NOT NULL DEFAULT '0', `number` smallint(5) NOT NULL DEFAULT '0' COMMENT '商品货品的购买数量', " +
		"`price` decimal(10,2) NOT NULL DEFAULT '0.00', `specifications` varchar(1023) NOT NULL, `pic_url` varchar(255) NOT NULL DEFAULT '', " +
		"`comment` int(11) DEFAULT '0', `add_time` datetime DEFAULT NULL, `update_time` datetime DEFAULT NULL, " +
		"`deleted` tinyint(1) DEFAULT '0', PRIMARY KEY (`id`), KEY `order_id` (`order_id`), KEY `goods_id` (`goods_id`)) " +
		"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='订单商品表'",
	"CREATE TABLE `litemall_goods_product` (`id` int(11) NOT NULL AUTO_INCREMENT, `goods_id` int(11) NOT NULL DEFAULT '0', " +
		"`specifications` varchar(1023) NOT NULL, `price` decimal(10,2) NOT NULL DEFAULT '0.00', " +
		"`number` int(11) NOT NULL DEFAULT '0' COMMENT '商品货品数量', `url` varchar(125) DEFAULT NULL, `add_time` datetime DEFAULT NULL, " +
		"`update_time` datetime DEFAULT NULL, `deleted` tinyint(1) DEFAULT '0', PRIMARY KEY (`id`)) " +
		"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='商品货品表'",
	"CREATE TABLE `litemall_coupon_user` (`id` int(11) NOT NULL AUTO_INCREMENT, `user_id` int(11) NOT NULL, " +
		"`coupon_id` int(11) NOT NULL, `status` smallint(6) DEFAULT '0' COMMENT '使用状态, 0未使用；1已使用；2已过期；3已经下架', " +
		"`used_time` datetime DEFAULT NULL, `start_time` datetime DEFAULT NULL, `end_time` datetime DEFAULT NULL, " +
		"`order_id` int(11) DEFAULT NULL, `add_time` datetime DEFAULT NULL, `update_time` datetime DEFAULT NULL, " +
		"`deleted` tinyint(1) DEFAULT '0', PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='优惠券用户使用表'",
	"CREATE TABLE `litemall_system` (`id` int(11) NOT NULL AUTO_INCREMENT, `key_name` varchar(255) NOT NULL, " +
		"`key_value` varchar(255) NOT NULL, `add_time` datetime DEFAULT NULL, `update_time` datetime DEFAULT NULL, " +
		"`deleted` tinyint(1) DEFAULT '0', PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='系统配置表'",
	"INSERT INTO `litemall_system` (key_name, key_value) VALUES ('litemall_order_unpaid', '30')",
}

// mallYAML declares mall's tables as they are.
const mallYAML = `
order:
  schema:
    table: oms_order
    scanIndex: idx_status_create_time    # added for the executor: (status, create_time)
    orderNo: order_sn
    user: member_id
    status: status
    createTime: create_time
    unpaid: 0
    closed: 4
    timeoutColumn: ""
    timeoutMinutes: 120                  # oms_order_setting.normal_order_overtime
    closeTime: ""                        # mall has no close time column
    updateTime: modify_time
    closeReason: ""
    softDelete: {column: delete_status, liveValue: 0}
    items: {table: oms_order_item, index: idx_order_id, orderKey: id, orderColumn: order_id, sku: product_sku_id, quantity: product_quantity}
    stock: {table: pms_sku_stock, key: id, columns: ["lock_stock -= quantity"]}
    coupon:
      table: sms_coupon_history
      status: use_status                 # 1 used, 0 unused
      match: ["member_id = member_id", "coupon_id = coupon_id"]
      anyCopy: true                      # a member's copies of one coupon are interchangeable
      index: idx_member_coupon
    givebacks: ["ums_member.integration += use_integration by ums_member.id = member_id"]
`

// litemallYAML declares litemall's tables as they are.
const litemallYAML = `
order:
  schema:
    table: litemall_order
    scanIndex: idx_status_add_time       # added for the executor: (order_status, add_time)
    orderNo: order_sn
    user: user_id
    status: order_status
    createTime: add_time
    unpaid: 101
    closed: 103                          # STATUS_AUTO_CANCEL
    timeoutColumn: ""
    timeoutMinutes: 30                   # litemall_system litemall_order_unpaid
    closeTime: end_time
    updateTime: update_time
    closeReason: ""
    softDelete: {column: deleted, liveValue: 0}
    items: {table: litemall_order_goods, index: order_id, orderKey: id, orderColumn: order_id, sku: product_id, quantity: number}
    stock: {table: litemall_goods_product, key: id, columns: ["number += quantity"]}
    coupon:
      table: litemall_coupon_user
      status: status                     # 1 used, 0 usable
      match: ["order_id = id"]          # the coupon row names the order
      optional: true                     # an order matching no used row used no coupon
      index: idx_order_id
`
