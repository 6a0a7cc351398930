-- sysbench script: sql-bench crud's own statements on its own tables, prepared once per
-- connection (binary protocol, as sql-bench's client does), autocommit.
--   --op=read   SELECT v FROM fairbench.crud_read WHERE k = ?   k uniform in 1..--rows
--   --op=write  INSERT INTO fairbench.crud_write (k, v) VALUES (?, ?)   k unique and negative
--               (sql-bench's keys are positive), v --value_size bytes
sysbench.cmdline.options = {
  op = {"read or write", "read"},
  rows = {"rows of fairbench.crud_read", 1000},
  value_size = {"bytes per written value", 100},
  leg = {"leg number: keeps each leg's write keys apart", 1},
}

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  if sysbench.opt.op == "read" then
    stmt = con:prepare("SELECT v FROM fairbench.crud_read WHERE k = ?")
    key = stmt:bind_create(sysbench.sql.type.BIGINT)
    stmt:bind_param(key)
  else
    stmt = con:prepare("INSERT INTO fairbench.crud_write (k, v) VALUES (?, ?)")
    key = stmt:bind_create(sysbench.sql.type.BIGINT)
    value = stmt:bind_create(sysbench.sql.type.VARCHAR, sysbench.opt.value_size)
    stmt:bind_param(key, value)
    value:set(string.rep("v", sysbench.opt.value_size))
  end
  written = 0
end

function event()
  if sysbench.opt.op == "read" then
    key:set(sysbench.rand.uniform(1, sysbench.opt.rows))
  else
    written = written + 1
    key:set(-(sysbench.opt.leg * 1000000000000 + sysbench.tid * 1000000000 + written))
  end
  stmt:execute()
end

function thread_done()
  stmt:close()
  con:disconnect()
end
