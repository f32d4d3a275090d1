package fakeconsole

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

func (c *Console) groupJSON(g *Group) map[string]any {
	var reg any
	if g.AddressList != "" {
		reg = strings.Split(g.AddressList, ",")
	}
	m := map[string]any{"id": g.ID, "appname": g.AppName, c.titleKey: g.Title, "addressType": g.AddressType,
		"addressList": nullIfEmpty(g.AddressList), "registryList": reg, "updateTime": c.stamp()}
	if c.opts.Version == VMain {
		m["accessToken"] = nullIfEmpty(g.AccessToken)
	}
	return m
}

func (c *Console) groupList(w http.ResponseWriter, form url.Values) {
	p := c.params(w, form, "/jobgroup/pageList")
	offset, size := p.page()
	appname, title := p.str("appname"), p.str(c.titleKey)
	if p.err {
		return
	}
	var rows []*Group
	for _, g := range c.groups {
		if strings.Contains(g.AppName, appname) && strings.Contains(g.Title, title) {
			rows = append(rows, g)
		}
	}
	slices.SortFunc(rows, func(a, b *Group) int {
		return cmp.Or(cmp.Compare(a.AppName, b.AppName), cmp.Compare(a.Title, b.Title), cmp.Compare(a.ID, b.ID))
	})
	pageTable(c, w, rows, offset, size, c.groupJSON)
}

func (c *Console) groupLoad(w http.ResponseWriter, form url.Values) {
	p := c.params(w, form, "/jobgroup/loadById")
	id := p.int("id", true, 0)
	if p.err {
		return
	}
	for _, g := range c.groups {
		if g.ID == id {
			c.ok(w, c.groupJSON(g))
			return
		}
	}
	c.fail(w, "参数非法")
}

func (c *Console) groupSave(w http.ResponseWriter, form url.Values, update bool) {
	p := c.params(w, form, "/jobgroup/save")
	addressType := p.int("addressType", false, 0)
	id := 0
	if update {
		id = p.int("id", false, 0)
	}
	if p.err {
		return
	}
	appname, title, list := form.Get("appname"), form.Get(c.titleKey), form.Get("addressList")
	token := form.Get("accessToken") // bound on the branch after 3.4, an unknown field before
	dup := slices.ContainsFunc(c.groups, func(g *Group) bool { return g.AppName == appname })
	switch {
	case strings.TrimSpace(appname) == "":
		c.fail(w, "请输入AppName")
	case len(appname) < 4 || len(appname) > 64:
		c.fail(w, "AppName长度限制为4~64")
	case !update && strings.ContainsAny(appname+title, "<>"):
		c.fail(w, "AppName限制为小写字母、数字、中划线")
	case strings.TrimSpace(title) == "":
		c.fail(w, "请输入名称")
	case addressType != 0 && strings.TrimSpace(list) == "":
		c.fail(w, "机器地址不可为空")
	case !update && dup && c.opts.Version == VMain:
		c.fail(w, "AppName 重复")
	case c.titleTooLong(title):
		c.fail(w, "\n### Error updating database.  Cause: com.mysql.cj.jdbc.exceptions.MysqlDataTruncation: "+
			"Data truncation: Data too long for column 'title' at row 1")
	default:
		if addressType == 0 {
			list = "" // recomputed from live registrations: none here
		}
		if c.opts.Version != VMain {
			token = ""
		}
		if !update {
			c.nextID++
			c.groups = append(c.groups, &Group{ID: c.nextID, AppName: appname, Title: title, AddressType: addressType,
				AddressList: list, AccessToken: token})
			c.ok(w, nil) // no id: the caller lists again
			return
		}
		for _, g := range c.groups {
			if g.ID == id {
				// The update overwrites the token too: an omitted one is cleared.
				*g = Group{ID: id, AppName: appname, Title: title, AddressType: addressType, AddressList: list, AccessToken: token}
				c.ok(w, nil)
				return
			}
		}
		c.fail(w, "参数非法")
	}
}

// titleTooLong: the column is varchar(12) up to 3.3.2, 64 from 3.4.0.
func (c *Console) titleTooLong(title string) bool {
	limit := 12
	if c.opts.Version != V24 {
		limit = 64
	}
	return len([]rune(title)) > limit
}
